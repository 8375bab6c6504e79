"""Texts that a tokenizer gets wrong first, checked against reference tokenizers.

tests/components/test_pretrained_tokens.py (the Transform's in-graph
tokenizers) and tests/preflight/test_token_counts.py (the preflight's counts
of the same tokens) both use them.
"""

TEXTS = [
    # English, mixed case.
    'Hello, world! This movie was GREAT fun.',
    # Accented Latin (stripped by the uncased model), ligature, sharp s.
    'Café naïve résumé ÅNGSTRÖM São Paulo Straße ﬁne İstanbul',
    # CJK (one token per ideograph), Japanese kana, Korean.
    '東京は日本の首都です。서울 특별시',
    # Cyrillic, Arabic, Devanagari, Greek.
    'Привет, как дела? مرحبا بالعالم नमस्ते दुनिया Καλημέρα',
    # Punctuation runs, symbols, numbers, emoji.
    "it's $5.00 (really) -- isn't it?! @user #tag 50% ~x^2 😀👍🏽",
    # Control characters, odd whitespace, U+FFFD, a zero-width space.
    'a\u00a0b\tc\nd\u200be\x00f\ufffdg\u2028h',
    # Empty and blank.
    '',
    '   \t  ',
    # A word over 100 characters ([UNK]) and a long non-ASCII word under it.
    'x' * 150 + ' ' + 'я' * 60,
    # Over-long: truncated, keeping [SEP].
    'the quick brown fox jumps over the lazy dog ' * 20,
]
