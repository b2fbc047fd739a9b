"""Inside the engine worker: the batchers (continuous for GGUF, dynamic for ONNX), slots, the
prompt cache, admission, embeddings, sequences, stop strings and the detokenizer."""
