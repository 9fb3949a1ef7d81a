"""The packaged demo data set (``demo.jsonl``): 36 questions about a fictional archipelago."""
