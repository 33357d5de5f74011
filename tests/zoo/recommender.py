"""Collaborative filtering with a subclassed `RecommenderNet`: user and movie embeddings, a dict of integer inputs.

Ported from keras-io, "Collaborative Filtering for Movie Recommendations" by Siddhartha Banerjee
(keras-team/keras-io, examples/structured_data/collaborative_filtering_movielens.py):
https://keras.io/examples/structured_data/collaborative_filtering_movielens/. Kept as written: `RecommenderNet(
num_users, num_movies, embedding_size)`, a subclassed `keras.Model` of a user and a movie `Embedding`
(`he_normal`, `l2(1e-6)`) and a bias `Embedding` each, `call` adding `ops.tensordot(user_vector, movie_vector, 2)`
and both biases under a sigmoid; ratings scaled to [0, 1]; `keras.losses.BinaryCrossentropy()`
(`train.loss: binary_crossentropy`, `data.task: regression`).

Adapted: MovieLens (a download) is 600 ratings drawn here from 20 users' and 30 movies' hidden tastes; the inputs
are a dict `{"user": ..., "movie": ...}` (the example's two columns of one array), so `call` reads them by name;
`get_config` and registration let the saved model be re-created; `EMBEDDING_SIZE` 50 is 4. The model is not
built until called: the pipeline must build it before seeding, so that `seeds.init` moves its weights.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers, ops

num_users, num_movies, EMBEDDING_SIZE = 20, 30, 4


def load(n=600):
    rng = np.random.default_rng(48)
    users = rng.integers(0, num_users, size=n)
    movies = rng.integers(0, num_movies, size=n)
    taste = rng.normal(size=(num_users, 2)) @ rng.normal(size=(2, num_movies))
    rating = np.clip(np.round(3 + taste[users, movies] + rng.normal(0, 0.5, n)), 1, 5)
    min_rating, max_rating = 1.0, 5.0
    y = ((rating - min_rating) / (max_rating - min_rating)).astype("float32")
    return {"x": {"user": users.astype("int64"), "movie": movies.astype("int64")}, "y": y}


@keras.saving.register_keras_serializable(package="zoo")
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
        user_vector = self.user_embedding(inputs["user"])
        user_bias = self.user_bias(inputs["user"])
        movie_vector = self.movie_embedding(inputs["movie"])
        movie_bias = self.movie_bias(inputs["movie"])
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


def build(input_shape, n_outputs):
    return RecommenderNet(num_users, num_movies, EMBEDDING_SIZE)
