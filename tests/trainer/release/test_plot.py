import json

from trainer.release import plot


def test_plot_writes_a_png(tmp_path):
    history = [
        {
            "step": s,
            "loss": 5 - s / 100,
            "eval_loss": 5.2 - s / 100,
            "accuracy": s / 1000,
            "eval_accuracy": s / 1100,
        }
        for s in (100, 200, 300)
    ]
    (tmp_path / "history.json").write_text(json.dumps(history))
    assert plot.main(["--run_dir", str(tmp_path), "--output", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot.main(["--run_dir", str(tmp_path / "none"), "--output", "x.png"]) == 2
