"""Compact Convolutional Transformer: StochasticDepth layers with their own `SeedGenerator` and a logits head.

Ported from keras-io, "Compact Convolutional Transformers" by Sayak Paul, converted to Keras 3 (last modified
2023/08/07): https://keras.io/examples/vision/cct/ (keras-team/keras-io, examples/vision/cct.py). Kept as written:
the tokenizer (conv + zero padding + max pooling), the learned position embedding, StochasticDepth drawing from
its own `keras.random.SeedGenerator(1337)`, the pre-norm transformer blocks with MultiHeadAttention and MLP
dropout 0.1, sequence pooling, a `Dense(num_classes)` head with no activation (logits), and the loss
`CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)` (`loss` below, for `train.loss`) with AdamW.

Shrunk for 8x8 digits on a CPU: conv channels [64, 128] -> [8, 16] (so projection_dim 128 -> 16, the transformer
units the same), `Rescaling(1/255)` -> `Rescaling(1.0)` (the digits come in [0, 1]), `RandomCrop(32, 32)` ->
`RandomCrop(8, 8)`. Adapted: integer labels are one-hot encoded inside the loss (the example one-hot encodes the
data set), and `SequencePooling.__init__` passes `**kwargs` on so Keras can re-create it from its config when the
saved model is loaded (the example never reloads its model). The MLP's `activation=keras.ops.gelu` became
`activation="gelu"`: Keras saves the function by its name and reloads it as `keras.activations.gelu`, which is
the exact GELU where `keras.ops.gelu` is the tanh approximation, so the example's saved model computes other
outputs (up to 2e-4 here) than the model it trained; the pipeline refuses that model before training, naming the
layer (tests/test_one_path.py).
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers


class CCTTokenizer(layers.Layer):
    def __init__(
        self,
        kernel_size=3,
        stride=1,
        padding=1,
        pooling_kernel_size=3,
        pooling_stride=2,
        num_conv_layers=2,
        num_output_channels=(8, 16),
        **kwargs,
    ):
        super().__init__(**kwargs)
        # This is our tokenizer.
        self.conv_model = keras.Sequential()
        for i in range(num_conv_layers):
            self.conv_model.add(
                layers.Conv2D(
                    num_output_channels[i],
                    kernel_size,
                    stride,
                    padding="valid",
                    use_bias=False,
                    activation="relu",
                    kernel_initializer="he_normal",
                )
            )
            self.conv_model.add(layers.ZeroPadding2D(padding))
            self.conv_model.add(layers.MaxPooling2D(pooling_kernel_size, pooling_stride, "same"))

    def call(self, images):
        outputs = self.conv_model(images)
        # After passing the images through our mini-network the spatial dimensions are flattened to form sequences.
        return keras.ops.reshape(
            outputs,
            (-1, keras.ops.shape(outputs)[1] * keras.ops.shape(outputs)[2], keras.ops.shape(outputs)[-1]),
        )


class PositionEmbedding(layers.Layer):
    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if sequence_length is None:
            raise ValueError("`sequence_length` must be an Integer, received `None`.")
        self.sequence_length = int(sequence_length)
        self.initializer = keras.initializers.get(initializer)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"sequence_length": self.sequence_length, "initializer": keras.initializers.serialize(self.initializer)}
        )
        return config

    def build(self, input_shape):
        feature_size = input_shape[-1]
        self.position_embeddings = self.add_weight(
            name="embeddings", shape=[self.sequence_length, feature_size], initializer=self.initializer, trainable=True
        )
        super().build(input_shape)

    def call(self, inputs, start_index=0):
        shape = keras.ops.shape(inputs)
        feature_length = shape[-1]
        sequence_length = shape[-2]
        # trim to match the length of the input sequence, which might be less than the sequence_length of the layer.
        position_embeddings = keras.ops.convert_to_tensor(self.position_embeddings)
        position_embeddings = keras.ops.slice(position_embeddings, (start_index, 0), (sequence_length, feature_length))
        return keras.ops.broadcast_to(position_embeddings, shape)

    def compute_output_shape(self, input_shape):
        return input_shape


class SequencePooling(layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.attention = layers.Dense(1)

    def call(self, x):
        attention_weights = keras.ops.softmax(self.attention(x), axis=1)
        attention_weights = keras.ops.transpose(attention_weights, axes=(0, 2, 1))
        weighted_representation = keras.ops.matmul(attention_weights, x)
        return keras.ops.squeeze(weighted_representation, -2)


# Referred from: github.com:rwightman/pytorch-image-models.
class StochasticDepth(layers.Layer):
    def __init__(self, drop_prop, **kwargs):
        super().__init__(**kwargs)
        self.drop_prob = drop_prop
        self.seed_generator = keras.random.SeedGenerator(1337)

    def call(self, x, training=None):
        if training:
            keep_prob = 1 - self.drop_prob
            shape = (keras.ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
            random_tensor = keep_prob + keras.random.uniform(shape, 0, 1, seed=self.seed_generator)
            random_tensor = keras.ops.floor(random_tensor)
            return (x / keep_prob) * random_tensor
        return x


def mlp(x, hidden_units, dropout_rate):
    for units in hidden_units:
        x = layers.Dense(units, activation="gelu")(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


def build(
    input_shape,
    n_outputs,
    conv_channels=(8, 16),
    num_heads=2,
    transformer_layers=2,
    stochastic_depth_rate=0.1,
    positional_emb=True,
):
    """The example's `create_cct_model`, its hyperparameters as builder kwargs; returns logits."""
    projection_dim = conv_channels[-1]
    transformer_units = [projection_dim, projection_dim]
    image_size = input_shape[0]
    data_augmentation = keras.Sequential(
        [
            layers.Rescaling(scale=1.0),
            layers.RandomCrop(image_size, image_size),
            layers.RandomFlip("horizontal"),
        ],
        name="data_augmentation",
    )

    inputs = layers.Input(input_shape)
    # Augment data.
    augmented = data_augmentation(inputs)
    # Encode patches.
    cct_tokenizer = CCTTokenizer(num_output_channels=list(conv_channels))
    encoded_patches = cct_tokenizer(augmented)
    # Apply positional embedding.
    if positional_emb:
        sequence_length = encoded_patches.shape[1]
        encoded_patches += PositionEmbedding(sequence_length=sequence_length)(encoded_patches)

    # Calculate Stochastic Depth probabilities.
    dpr = [x for x in np.linspace(0, stochastic_depth_rate, transformer_layers)]

    # Create multiple layers of the Transformer block.
    for i in range(transformer_layers):
        # Layer normalization 1.
        x1 = layers.LayerNormalization(epsilon=1e-5)(encoded_patches)
        # Create a multi-head attention layer.
        attention_output = layers.MultiHeadAttention(num_heads=num_heads, key_dim=projection_dim, dropout=0.1)(x1, x1)
        # Skip connection 1.
        attention_output = StochasticDepth(dpr[i])(attention_output)
        x2 = layers.Add()([attention_output, encoded_patches])
        # Layer normalization 2.
        x3 = layers.LayerNormalization(epsilon=1e-5)(x2)
        # MLP.
        x3 = mlp(x3, hidden_units=transformer_units, dropout_rate=0.1)
        # Skip connection 2.
        x3 = StochasticDepth(dpr[i])(x3)
        encoded_patches = layers.Add()([x3, x2])

    # Apply sequence pooling.
    representation = layers.LayerNormalization(epsilon=1e-5)(encoded_patches)
    weighted_representation = SequencePooling()(representation)
    # Classify outputs.
    logits = layers.Dense(n_outputs)(weighted_representation)
    # Create the Keras model.
    return keras.Model(inputs=inputs, outputs=logits)


def loss(y_true, y_pred):
    """The example's `CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)` on integer labels."""
    labels = keras.ops.one_hot(keras.ops.cast(keras.ops.reshape(y_true, (-1,)), "int32"), keras.ops.shape(y_pred)[-1])
    return keras.losses.categorical_crossentropy(labels, y_pred, from_logits=True, label_smoothing=0.1)
