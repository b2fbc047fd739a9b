"""llama.cpp's /infill, in its /completion shape (llama.vscode, llama.vim)."""
