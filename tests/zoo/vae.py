"""Variational autoencoder with a classifier head: a Sampling layer that draws at inference, its own `train_step`.

Ported from keras-io, "Variational AutoEncoder" by fchollet (Keras 3 version, keras-team/keras-io,
examples/generative/vae.py): https://keras.io/examples/generative/vae/. Kept as written: the `Sampling` layer
drawing `keras.random.normal` from its own `SeedGenerator(1337)` in every call, training or not; the conv encoder
(`z_mean`, `z_log_var`, `z`) and the transposed-conv decoder; the `VAE` model with its loss trackers listed in
`metrics` and a `train_step` that adds the summed binary cross-entropy of the reconstruction to the KL loss.

Shrunk for 8x8 digits: conv filters 32, 64 -> 8, 16, the decoder's 7x7 seed -> 2x2, latent_dim 2 -> 8.
Adapted so the pipeline can score it as a classifier: a `classifier` head (Dense softmax) reads the sampled `z`,
`call` returns its class probabilities, `train_step` unpacks `(x, y)` and adds the compiled loss of the
classifier (`self.compute_loss`) to the VAE loss, an accuracy tracker joins the loss trackers, a `test_step`
computes the same losses without the gradient (the example never evaluates), and `get_config`/`from_config`
serialize the three sub-models so the saved model can be reloaded (the example never saves it).
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import layers, ops


class Sampling(layers.Layer):
    """Uses (z_mean, z_log_var) to sample z, the vector encoding a digit."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = keras.random.SeedGenerator(1337)

    def call(self, inputs):
        z_mean, z_log_var = inputs
        batch = ops.shape(z_mean)[0]
        dim = ops.shape(z_mean)[1]
        epsilon = keras.random.normal(shape=(batch, dim), seed=self.seed_generator)
        return z_mean + ops.exp(0.5 * z_log_var) * epsilon


class VAE(keras.Model):
    def __init__(self, encoder, decoder, classifier, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.decoder = decoder
        self.classifier = classifier
        self.total_loss_tracker = keras.metrics.Mean(name="total_loss")
        self.reconstruction_loss_tracker = keras.metrics.Mean(name="reconstruction_loss")
        self.kl_loss_tracker = keras.metrics.Mean(name="kl_loss")
        self.accuracy_tracker = keras.metrics.SparseCategoricalAccuracy(name="accuracy")

    @property
    def metrics(self):
        return [
            self.total_loss_tracker,
            self.reconstruction_loss_tracker,
            self.kl_loss_tracker,
            self.accuracy_tracker,
        ]

    def call(self, x):
        _z_mean, _z_log_var, z = self.encoder(x)
        return self.classifier(z)

    def vae_losses(self, x, y, training):
        z_mean, z_log_var, z = self.encoder(x, training=training)
        reconstruction = self.decoder(z, training=training)
        y_pred = self.classifier(z, training=training)
        reconstruction_loss = ops.mean(ops.sum(keras.losses.binary_crossentropy(x, reconstruction), axis=(1, 2)))
        kl_loss = -0.5 * (1 + z_log_var - ops.square(z_mean) - ops.exp(z_log_var))
        kl_loss = ops.mean(ops.sum(kl_loss, axis=1))
        total_loss = reconstruction_loss + kl_loss + self.compute_loss(x=x, y=y, y_pred=y_pred)
        return total_loss, reconstruction_loss, kl_loss, y_pred

    def update_trackers(self, y, total_loss, reconstruction_loss, kl_loss, y_pred):
        self.total_loss_tracker.update_state(total_loss)
        self.reconstruction_loss_tracker.update_state(reconstruction_loss)
        self.kl_loss_tracker.update_state(kl_loss)
        self.accuracy_tracker.update_state(y, y_pred)
        return {
            "loss": self.total_loss_tracker.result(),
            "reconstruction_loss": self.reconstruction_loss_tracker.result(),
            "kl_loss": self.kl_loss_tracker.result(),
            "accuracy": self.accuracy_tracker.result(),
        }

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            total_loss, reconstruction_loss, kl_loss, y_pred = self.vae_losses(x, y, training=True)
        grads = tape.gradient(total_loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights, strict=True))
        return self.update_trackers(y, total_loss, reconstruction_loss, kl_loss, y_pred)

    def test_step(self, data):
        x, y = data
        return self.update_trackers(y, *self.vae_losses(x, y, training=False))

    def get_config(self):
        return {
            "name": self.name,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "decoder": keras.saving.serialize_keras_object(self.decoder),
            "classifier": keras.saving.serialize_keras_object(self.classifier),
        }

    @classmethod
    def from_config(cls, config):
        parts = {
            key: keras.saving.deserialize_keras_object(config[key]) for key in ("encoder", "decoder", "classifier")
        }
        return cls(**parts, name=config.get("name"))


def build(input_shape, n_outputs, latent_dim=8, filters=(8, 16)):
    """The example's encoder and decoder for `input_shape` images, with a softmax classifier on `z`."""
    side = input_shape[0] // 4  # two stride-2 convolutions
    encoder_inputs = keras.Input(shape=input_shape)
    x = layers.Conv2D(filters[0], 3, activation="relu", strides=2, padding="same")(encoder_inputs)
    x = layers.Conv2D(filters[1], 3, activation="relu", strides=2, padding="same")(x)
    x = layers.Flatten()(x)
    x = layers.Dense(16, activation="relu")(x)
    z_mean = layers.Dense(latent_dim, name="z_mean")(x)
    z_log_var = layers.Dense(latent_dim, name="z_log_var")(x)
    z = Sampling()([z_mean, z_log_var])
    encoder = keras.Model(encoder_inputs, [z_mean, z_log_var, z], name="encoder")

    latent_inputs = keras.Input(shape=(latent_dim,))
    x = layers.Dense(side * side * filters[1], activation="relu")(latent_inputs)
    x = layers.Reshape((side, side, filters[1]))(x)
    x = layers.Conv2DTranspose(filters[1], 3, activation="relu", strides=2, padding="same")(x)
    x = layers.Conv2DTranspose(filters[0], 3, activation="relu", strides=2, padding="same")(x)
    decoder_outputs = layers.Conv2DTranspose(input_shape[-1], 3, activation="sigmoid", padding="same")(x)
    decoder = keras.Model(latent_inputs, decoder_outputs, name="decoder")

    classifier = keras.Sequential(
        [keras.Input(shape=(latent_dim,)), layers.Dense(n_outputs, activation="softmax")], name="classifier"
    )
    return VAE(encoder, decoder, classifier)
