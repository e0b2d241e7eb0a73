"""Callbacks: the private Keras attributes they rely on."""


def test_private_keras_apis_the_trainer_relies_on_still_exist():
    """DeterministicDropout reads `_flatten_layers` / `_seed_generators`: fail loudly on a
    Keras upgrade that renames them."""
    import keras

    from trainer.pretraining.callbacks import seed_generators

    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(2),
            keras.layers.Dropout(0.1),
        ]
    )
    assert len(seed_generators(model)) == 2
