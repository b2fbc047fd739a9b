"""One turn: what every chat and completion face asks (`Ask`), and `run_turn`, which runs it on
the model it names, local or upstream."""
