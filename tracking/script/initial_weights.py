"""The weights of a team's model against the draws of their initializers: what `run.seeded` re-draws by position,
and the weights a training already moved, which it keeps (a teacher trained before its student) or, where every one
moved, refuses to throw away. Keras's naming (`<weight>_initializer`) is the only link between a weight and its
initializer, so it is read in one place.
"""

from __future__ import annotations

from typing import Any

from tracking.errors import UsageError


def moved_weights(created: Any) -> tuple[list[Any], int]:
    """The weights, among those drawn by a layer's own Keras random initializer with a fixed seed, that no longer
    hold that initializer's draw (the draw repeats exactly), with how many such weights were judged: the weights a
    training moved, whatever ran it (`fit`, a `GradientTape` loop with its optimizer outside the model), or that
    were set or loaded. Trainable or not: a backbone frozen (`trainable = False`) after its pretrained weights were
    loaded holds them as non-trainable weights, and they are kept like any other."""
    import numpy as np
    from keras.src.initializers.random_initializers import RandomInitializer

    moved, judged = [], 0
    for layer, variable, initializer in created.weights:
        # Only the layer's own initializer object drew the weight; one named by a string is drawn afresh each time.
        own = any(getattr(layer, name, None) is initializer for name in initializer_names(variable.name))
        seeded = isinstance(initializer, RandomInitializer) and isinstance(initializer.seed, int)
        if own and seeded:
            judged += 1
            drawn = np.asarray(initializer(variable.shape, dtype=variable.dtype))
            if not np.array_equal(drawn, np.asarray(variable)):
                moved.append(variable)
    return moved, judged


def created_weights(model: Any) -> Any:
    """The weights of a built model with the initializer each was drawn from, found by Keras's naming (a layer's
    `kernel` from its `kernel_initializer`); one whose initializer is not found is left out and reported by the
    seeding as randomness no seed covers."""
    from keras import initializers

    from tracking.determinism.seeding import Created, walk_layers

    created = Created(missing="with no initializer the layer names after it (`<weight>_initializer`)")
    for layer in walk_layers(model):
        for variable in layer._trainable_variables + layer._non_trainable_variables:
            names = [name for name in initializer_names(variable.name) if getattr(layer, name, None) is not None]
            if names:
                initializer = getattr(layer, names[0])
                created.weights.append((layer, variable, initializers.get(initializer)))
    return created


def initializer_names(weight: str) -> tuple[str, ...]:
    """The layer attributes that may hold a weight's initializer, by Keras's naming: `<weight>_initializer`, and for
    a `<kind>_kernel` also `<kind>_initializer` (an RNN cell's `recurrent_kernel` is drawn by its
    `recurrent_initializer`, a separable convolution's `depthwise_kernel` by its `depthwise_initializer`); a
    depthwise convolution's `kernel` is drawn by its `depthwise_initializer` (MobileNet's DepthwiseConv2D)."""
    if weight == "kernel":
        return ("kernel_initializer", "depthwise_initializer")
    kind = weight.removesuffix("_kernel")
    return (f"{weight}_initializer",) if kind == weight else (f"{weight}_initializer", f"{kind}_initializer")


def keep_moved(created: Any) -> None:
    """Keep the weights a training moved before `run.seeded` (a teacher trained before its student); where every
    weight moved, the model trained, and re-seeding it would throw that away: one error line."""
    moved, judged = moved_weights(created)
    if moved and len(moved) == judged:  # every weight moved: the model trained, not one part of it
        paths = [variable.path for variable in moved]
        raise UsageError(
            f"run.seeded(): {len(moved)} weight(s) of the model ({', '.join(paths[:3])}"
            f"{', ...' if len(moved) > 3 else ''}) are not what their initializers drew: it trained (by fit or "
            "a loop of its own), had weights set or loaded, or was seeded already, so re-seeding would throw "
            "them away",
            fix="call run.seeded(model) once, right after building the model, before any training",
        )
    created.kept.update(id(variable) for variable in moved)
