"""What both commands' training loops share: the optimizer and its schedules, TensorBoard
summaries, and how a pod's hosts check that they run the same thing (`hosts`)."""
