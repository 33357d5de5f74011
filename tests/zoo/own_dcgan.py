"""A team's own train.py: a GAN whose `train_step` trains two models with two optimizers, through `tracking.start`.

Ported from keras-io, "GAN overriding `Model.train_step`" by François Chollet (keras-team/keras-io,
examples/generative/dcgan_overriding_train_step.py): https://keras.io/examples/generative/dcgan_overriding_train_step/.
Kept as the example has them: a convolutional discriminator (strided `Conv2D` and `LeakyReLU(0.2)`, global max
pooling, one logit) and a generator mirroring it with `Conv2DTranspose`; the `GAN` model of both, whose `compile`
takes one Adam optimizer each and `BinaryCrossentropy(from_logits=True)`, and whose `train_step` draws latent
vectors and the labels' noise with `tf.random` (stateful ops, drawn from TensorFlow's global seed: `seeds.base`'s),
trains the discriminator, then the generator, and returns `d_loss` and `g_loss`; trained
by `fit`. Shrunk for 8x8 one-channel digits on a CPU: scikit-learn's 1,797 digits (not MNIST's 70,000), 8 and 16
filters (not 64 and 128), a latent space of 8 (not 128), the generator from 2x2 to 8x8, 2 epochs, no image callback.
Added: the `# tracking` lines and the seed from params.yaml.
"""

import json

import keras
import tensorflow as tf
import yaml
from keras import layers
from sklearn.datasets import load_digits

import tracking  # tracking

with open("params.yaml") as handle:
    params = yaml.safe_load(handle)
run = tracking.start(seeds={"base": "train.seed"})  # tracking

latent_dim = 8
all_digits = (load_digits().images.astype("float32") / 16).reshape(-1, 8, 8, 1)
run.log_data(all_digits)  # tracking

discriminator = keras.Sequential(
    [
        keras.Input(shape=(8, 8, 1)),
        layers.Conv2D(8, (3, 3), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(16, (3, 3), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.GlobalMaxPooling2D(),
        layers.Dense(1),
    ],
    name="discriminator",
)
generator = keras.Sequential(
    [
        keras.Input(shape=(latent_dim,)),
        layers.Dense(2 * 2 * 16),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Reshape((2, 2, 16)),
        layers.Conv2DTranspose(16, (4, 4), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2DTranspose(16, (4, 4), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(1, (3, 3), padding="same", activation="sigmoid"),
    ],
    name="generator",
)


class GAN(keras.Model):
    def __init__(self, discriminator, generator, latent_dim):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.latent_dim = latent_dim

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn

    def train_step(self, real_images):
        batch_size = tf.shape(real_images)[0]
        random_latent_vectors = tf.random.normal(shape=(batch_size, self.latent_dim))
        generated_images = self.generator(random_latent_vectors)
        combined_images = tf.concat([generated_images, real_images], axis=0)
        labels = tf.concat([tf.ones((batch_size, 1)), tf.zeros((batch_size, 1))], axis=0)
        labels += 0.05 * tf.random.uniform(tf.shape(labels))  # noise on the labels, as the example adds
        with tf.GradientTape() as tape:
            d_loss = self.loss_fn(labels, self.discriminator(combined_images))
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights, strict=True))

        random_latent_vectors = tf.random.normal(shape=(batch_size, self.latent_dim))
        misleading_labels = tf.zeros((batch_size, 1))
        with tf.GradientTape() as tape:
            g_loss = self.loss_fn(misleading_labels, self.discriminator(self.generator(random_latent_vectors)))
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights, strict=True))
        return {"d_loss": d_loss, "g_loss": g_loss}


gan = run.seeded(GAN(discriminator=discriminator, generator=generator, latent_dim=latent_dim))  # tracking
gan.compile(
    d_optimizer=keras.optimizers.Adam(learning_rate=0.0003),
    g_optimizer=keras.optimizers.Adam(learning_rate=0.0003),
    loss_fn=keras.losses.BinaryCrossentropy(from_logits=True),
)
history = gan.fit(all_digits, batch_size=64, epochs=params["train"]["epochs"], callbacks=[run.callback()], verbose=2)
scores = {name: float(values[-1]) for name, values in history.history.items()}
run.log_metrics(scores)  # tracking
scores["weights_sha256"] = run.log_model(gan)  # tracking
with open("metrics.json", "w") as handle:
    json.dump(scores, handle, indent=2)
