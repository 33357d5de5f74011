"""A team's own train.py on JAX: keras-io's subclassed `RecommenderNet`, trained through `tracking.start`.

Ported from keras-io, "Collaborative Filtering for Movie Recommendations" by Siddhartha Banerjee
(keras-team/keras-io, examples/structured_data/collaborative_filtering_movielens.py):
https://keras.io/examples/structured_data/collaborative_filtering_movielens/. Kept as written: the backend chosen
in the script (`os.environ["KERAS_BACKEND"]`, here "jax"); `RecommenderNet(num_users, num_movies,
embedding_size)` reading `inputs[:, 0]` and `inputs[:, 1]` of one (n, 2) array of user and movie indices;
ratings scaled to [0, 1]; `model.compile(loss=keras.losses.BinaryCrossentropy(),
optimizer=keras.optimizers.Adam(learning_rate=0.001))`; `model.fit(x=x_train, y=y_train, batch_size=64, ...)`.

Adapted: MovieLens (a download) is 600 ratings drawn from hidden tastes, the seed of the draw from params.yaml
(`data.seed`); `EMBEDDING_SIZE` 50 is 4; epochs from params.yaml. Added: the `# tracking` lines, the seed from
params.yaml, a call on two samples before `run.seeded` so that the model's weights exist to be seeded (keras-io's
model is built by its first `fit`), and `get_config` so the logged model re-creates.
"""

import os

os.environ["KERAS_BACKEND"] = "jax"

import keras
import numpy as np
import yaml
from keras import layers, ops

import tracking  # tracking

with open("params.yaml") as handle:
    params = yaml.safe_load(handle)
run = tracking.start(seeds={"base": "train.seed"})  # tracking

num_users, num_movies, EMBEDDING_SIZE = 20, 30, 4
rng = np.random.default_rng(params["data"]["seed"])
users = rng.integers(0, num_users, size=600)
movies = rng.integers(0, num_movies, size=600)
taste = rng.normal(size=(num_users, 2)) @ rng.normal(size=(2, num_movies))
rating = np.clip(np.round(3 + taste[users, movies] + rng.normal(0, 0.5, 600)), 1, 5)
min_rating, max_rating = 1.0, 5.0
x = np.stack([users, movies], axis=1).astype("int64")
y = ((rating - min_rating) / (max_rating - min_rating)).astype("float32")
train_indices = int(0.9 * len(x))
x_train, x_val, y_train, y_val = x[:train_indices], x[train_indices:], y[:train_indices], y[train_indices:]


@keras.saving.register_keras_serializable(package="team")
class RecommenderNet(keras.Model):
    def __init__(self, num_users, num_movies, embedding_size, **kwargs):
        super().__init__(**kwargs)
        self.num_users = num_users
        self.num_movies = num_movies
        self.embedding_size = embedding_size
        self.user_embedding = layers.Embedding(
            num_users,
            embedding_size,
            embeddings_initializer="he_normal",
            embeddings_regularizer=keras.regularizers.l2(1e-6),
        )
        self.user_bias = layers.Embedding(num_users, 1)
        self.movie_embedding = layers.Embedding(
            num_movies,
            embedding_size,
            embeddings_initializer="he_normal",
            embeddings_regularizer=keras.regularizers.l2(1e-6),
        )
        self.movie_bias = layers.Embedding(num_movies, 1)

    def call(self, inputs):
        user_vector = self.user_embedding(inputs[:, 0])
        user_bias = self.user_bias(inputs[:, 0])
        movie_vector = self.movie_embedding(inputs[:, 1])
        movie_bias = self.movie_bias(inputs[:, 1])
        dot_user_movie = ops.tensordot(user_vector, movie_vector, 2)
        # Add all the components (including bias)
        x = dot_user_movie + user_bias + movie_bias
        # The sigmoid activation forces the rating to between 0 and 1
        return ops.nn.sigmoid(x)

    def get_config(self):
        return {
            **super().get_config(),
            "num_users": self.num_users,
            "num_movies": self.num_movies,
            "embedding_size": self.embedding_size,
        }


model = RecommenderNet(num_users, num_movies, EMBEDDING_SIZE)
model(x_train[:2])  # built before seeding: its weights exist only once it is called
model = run.seeded(model)  # tracking
model.compile(loss=keras.losses.BinaryCrossentropy(), optimizer=keras.optimizers.Adam(learning_rate=0.001))
run.log_data(x_train, y_train)  # tracking

history = model.fit(
    x=x_train,
    y=y_train,
    batch_size=64,
    epochs=params["train"]["epochs"],
    verbose=1,
    validation_data=(x_val, y_val),
    callbacks=[run.callback()],  # tracking
)
run.log_metrics({"final_loss": history.history["loss"][-1]})  # tracking
run.log_model(model, outputs="probabilities")  # tracking
