"""What a chat asks of the model and makes of its answer, for every face: the prompt's plan,
tool calls, structured output, fill-in-the-middle, and the answer's parser. No HTTP inside."""
