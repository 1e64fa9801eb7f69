"""Lesson 07's model: the GPT (gpt.py) and decoding with its cache (generate.py). Importing this package imports no torch; its modules do."""
