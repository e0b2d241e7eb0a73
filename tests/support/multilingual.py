"""Small multilingual texts for tests, written for this project: sentences of ordinary
prose about software and data in scripts written without spaces (Chinese, Japanese, Thai)
and with them (English, German, Russian), and seeded documents made of them."""

from __future__ import annotations

import random

SENTENCES = {
    "zh": [
        "这个工具可以把原始文本转换成训练模型所需要的数据文件。",
        "我们先训练一个分词器，然后用它把每篇文档切分成词元序列。",
        "如果输入文件在读取过程中被截断，程序会记录一条错误信息并停止提交。",
        "训练过程中每隔一段时间就会保存检查点，以便在机器被抢占后继续运行。",
        "用户可以在配置文件里设置批量大小、学习率和训练步数。",
        "数据被打乱后写入多个分片，每个分片的大小大致相同。",
        "评估时使用固定的随机种子，因此每次运行得到的指标都可以直接比较。",
        "这篇文档介绍了如何在本地机器上准备一个小型语料库并训练模型。",
        "中文句子之间通常没有空格，所以按空格切分得到的往往是一整句话。",
        "模型训练完成以后，可以导出为其他框架能够直接加载的格式。",
        "日志里会列出被过滤掉的文档数量以及最常见的过滤原因。",
        "为了节省内存，程序把中间结果写到磁盘上，而不是全部放在内存里。",
    ],
    "ja": [
        "このツールは、生のテキストからモデルの学習に必要なデータファイルを作成します。",
        "まずトークナイザーを学習し、それを使って各文書をトークン列に分割します。",
        "入力ファイルが途中で切れている場合は、エラーを記録してコミットを中止します。",
        "学習中は一定の間隔でチェックポイントを保存するので、中断されても再開できます。",
        "バッチサイズや学習率、ステップ数は設定ファイルで変更できます。",
        "データはシャッフルされたあと、ほぼ同じ大きさの複数のシャードに書き込まれます。",
        "評価には固定の乱数シードを使うため、実行ごとの指標をそのまま比較できます。",
        "この文書では、手元のマシンで小さなコーパスを準備してモデルを学習する方法を説明します。",
        "日本語の文には単語の間に空白がないため、空白で区切ると文全体が一つの単語になります。",
        "学習が終わったモデルは、ほかのライブラリから読み込める形式で書き出せます。",
        "ログには除外された文書の数と、よく見られる除外理由が表示されます。",
        "メモリを節約するために、途中の結果はメモリではなくディスクに書き出されます。",
    ],
    "th": [
        "เครื่องมือนี้แปลงข้อความดิบให้เป็นไฟล์ข้อมูลที่ใช้ในการฝึกโมเดล",
        "ขั้นแรกเราฝึกตัวตัดคำแล้วใช้มันแบ่งเอกสารแต่ละฉบับออกเป็นลำดับของโทเคน",
        "ถ้าไฟล์ขาเข้าถูกตัดกลางทางโปรแกรมจะบันทึกข้อผิดพลาดและไม่บันทึกผลลัพธ์",
        "ระหว่างการฝึกระบบจะบันทึกจุดตรวจสอบเป็นระยะเพื่อให้ทำงานต่อได้เมื่อเครื่องถูกยึดคืน",
        "ผู้ใช้สามารถกำหนดขนาดชุดข้อมูลอัตราการเรียนรู้และจำนวนขั้นตอนได้ในไฟล์ตั้งค่า",
        "ข้อมูลจะถูกสลับลำดับแล้วเขียนลงในหลายส่วนที่มีขนาดใกล้เคียงกัน",
        "การประเมินผลใช้ค่าสุ่มตั้งต้นที่คงที่จึงเปรียบเทียบผลของแต่ละรอบได้โดยตรง",
        "เอกสารนี้อธิบายวิธีเตรียมคลังข้อความขนาดเล็กและฝึกโมเดลบนเครื่องของคุณเอง",
        "ภาษาไทยไม่เว้นวรรคระหว่างคำจึงทำให้การแบ่งด้วยช่องว่างได้ทั้งประโยค",
        "เมื่อฝึกเสร็จแล้วสามารถส่งออกโมเดลในรูปแบบที่ไลบรารีอื่นโหลดได้ทันที",
        "บันทึกการทำงานจะแสดงจำนวนเอกสารที่ถูกกรองออกและเหตุผลที่พบบ่อยที่สุด",
        "เพื่อประหยัดหน่วยความจำโปรแกรมจะเขียนผลลัพธ์ระหว่างทางลงดิสก์แทน",
    ],
    "en": [
        "This tool turns raw text into the data files that a model is trained on.",
        "We first train a tokenizer and then use it to split every document into tokens.",
        "When an input file is cut off while it is read, the run records an error and "
        "does not commit.",
        "During training a checkpoint is saved every so often, so a preempted machine can "
        "resume where it stopped.",
        "Users can set the batch size, the learning rate and the number of steps in one "
        "configuration.",
        "The rows are shuffled and then written to several shards of about the same size.",
        "Evaluation uses a fixed random seed, so the metrics of two runs can be compared directly.",
        "This page explains how to prepare a small corpus and train a model on your own machine.",
        "Once training is done, the model can be exported in a format other libraries load.",
        "The log lists how many documents were filtered out and the most common reasons.",
        "To save memory, intermediate results are written to disk instead of being held.",
        "A short example shows every step from the first command to the last one.",
    ],
    "de": [
        "Dieses Werkzeug wandelt Rohtext in die Dateien um, mit denen ein Modell trainiert wird.",
        "Zuerst trainieren wir einen Tokenizer und zerlegen damit jedes Dokument in Tokens.",
        "Wird eine Eingabedatei beim Lesen abgeschnitten, meldet der Lauf einen Fehler.",
        "Während des Trainings wird regelmäßig ein Prüfpunkt gespeichert.",
        "Die Zeilen werden gemischt und in mehrere gleich große Teile geschrieben.",
        "Die Auswertung verwendet einen festen Zufallswert, daher sind Läufe vergleichbar.",
        "Diese Seite erklärt, wie man einen kleinen Korpus vorbereitet und ein Modell trainiert.",
        "Das Protokoll zeigt, wie viele Dokumente entfernt wurden und warum.",
    ],
    "ru": [
        "Этот инструмент превращает исходный текст в файлы данных для обучения модели.",
        "Сначала мы обучаем токенизатор, а затем делим им каждый документ на токены.",
        "Если входной файл обрывается при чтении, запуск сообщает об ошибке.",
        "Во время обучения контрольная точка сохраняется через равные промежутки.",
        "Строки перемешиваются и записываются в несколько частей примерно одного размера.",
        "Оценка использует фиксированное случайное зерно, поэтому запуски сравнимы.",
        "Эта страница объясняет, как подготовить небольшой корпус и обучить модель.",
        "В журнале видно, сколько документов было отброшено и по какой причине.",
    ],
}
UNSPACED = ("zh", "ja", "th")
SEPARATOR = {"zh": "", "ja": "", "th": " "}  # Thai separates sentences with a space


def documents(lang: str, count: int, seed: int = 0, sentences: tuple = (3, 7)) -> list[str]:
    """`count` documents of 3 to 7 sentences of `lang`, drawn with `seed` (no two alike
    unless the draw repeats)."""
    rng = random.Random(f"{lang}:{seed}")
    pool = SENTENCES[lang]
    sep = SEPARATOR.get(lang, " ")
    return [sep.join(rng.sample(pool, rng.randint(*sentences))) for _ in range(count)]
