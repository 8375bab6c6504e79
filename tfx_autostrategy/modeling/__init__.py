"""The Keras models the Trainer builds, and the pretrained encoders they use.

`models` builds `bow`, `transformer` and `hub` inside a strategy's scope;
`embedding_training` holds LazyAdam; `hub_encoder` wraps a SavedModel encoder
and its pooling; `pretrained_dir` describes a Hugging Face or TF Hub model
directory (tokenizer, special tokens, pooling; no TensorFlow, so the CSV
preflight and the Transform read it too); `hf_checkpoint` converts a Hugging
Face checkpoint (safetensors) into a SavedModel encoder.

May import `tfx_autostrategy.settings` and `.conventions` only.
"""
