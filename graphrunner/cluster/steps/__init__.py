"""What a worker does with one message: the step executor, the item runner, and what a step decides."""
