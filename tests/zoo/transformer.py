"""A transformer block with dropout classifying digits read as a sequence of 8 rows.

Ported from keras-io, "Text classification with Transformer" by Apoorv Nandan, converted to Keras 3 (last modified
2024/01/18; keras-team/keras-io, examples/nlp/text_classification_with_transformer.py):
https://keras.io/examples/nlp/text_classification_with_transformer/. Kept as written: `TransformerBlock`
(MultiHeadAttention, a two-layer feed-forward network, two LayerNormalization and two `Dropout(rate)`), the
token-plus-position embedding, and the head: GlobalAveragePooling1D, Dropout(0.1), Dense(20, relu), Dropout(0.1),
a softmax output; adam with sparse categorical cross-entropy.

Adapted to digits: the IMDB reviews (a download of 200 word ids each) become the 8 rows of an 8x8 digit, a sequence
of 8 tokens of 8 pixels, so the token `Embedding` (20,000 words) is a `Dense(embed_dim)` projection of each row
(`RowAndPositionEmbedding`); the classes are the 10 digits rather than 2. Shrunk: embed_dim 32 -> 16, ff_dim
32 -> 16. Both layers' constructors pass `**kwargs` on, so Keras can re-create them from their configs when the
saved model is loaded (the example never saves its model).
"""

from __future__ import annotations

import keras
from keras import layers, ops


class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output)
        return self.layernorm2(out1 + ffn_output)


class RowAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.token_emb = layers.Dense(embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        maxlen = ops.shape(x)[-2]
        positions = ops.arange(start=0, stop=maxlen, step=1)
        positions = self.pos_emb(positions)
        x = self.token_emb(x)
        return x + positions


def build(input_shape, n_outputs, embed_dim=16, num_heads=2, ff_dim=16):
    maxlen = input_shape[0]
    inputs = layers.Input(shape=input_shape)
    rows = layers.Reshape((maxlen, -1))(inputs)
    embedding_layer = RowAndPositionEmbedding(maxlen, embed_dim)
    x = embedding_layer(rows)
    transformer_block = TransformerBlock(embed_dim, num_heads, ff_dim)
    x = transformer_block(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(0.1)(x)
    x = layers.Dense(20, activation="relu")(x)
    x = layers.Dropout(0.1)(x)
    outputs = layers.Dense(n_outputs, activation="softmax")(x)
    return keras.Model(inputs=inputs, outputs=outputs)
