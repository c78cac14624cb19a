"""Real model providers as worker executors: OpenAI Responses, Azure OpenAI, Anthropic Messages,
Google Gemini ``generateContent`` (spec/dsl.md §5).

Each module exposes one executor (``execute``) that the registry names; each imports its SDK
only when it runs, so nothing the CLI loads pays for the SDKs. ``common`` holds what they
share: the egress-bound call frame, the reply shape (the fake provider's), streaming
fragments and the translation of SDK failures into our errors.
"""
