"""`prov.model.dtype_policies`: the policy each layer computes in, as both ways in record it."""

import keras

from tracking.training.model import dtype_fields


def test_layers_with_their_own_policy_are_counted_beside_the_global_one():
    inputs = keras.Input((4,))
    x = keras.layers.Dense(3, dtype="mixed_bfloat16")(inputs)
    x = keras.layers.Dense(3, dtype="mixed_bfloat16")(x)
    model = keras.Model(inputs, keras.layers.Dense(2, dtype="float32")(x))
    assert keras.config.dtype_policy().name == "float32"  # what prov.model.dtype_policy alone would say
    assert dtype_fields(model) == {"dtype_policy": "float32", "dtype_policies": "mixed_bfloat16: 2, float32: 1"}
    nested = keras.Sequential([keras.Input((4,)), model, keras.layers.Dense(1, dtype="bfloat16")])
    # the layers of sub-models are counted, the models themselves are not
    assert dtype_fields(nested)["dtype_policies"] == "mixed_bfloat16: 2, float32: 1, bfloat16: 1"
