"""The Keras training step the cnn and transformer TensorFlow builders share.

One step: the forward in training mode, the mean softmax cross-entropy of the logits (cast to float32, so a
mixed-precision model's loss is computed in float32) against integer labels, the gradients (through the loss
scale where the optimizer is a LossScaleOptimizer), and the optimizer's update. Returns the loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def train_step(tf: Any, model: Any, opt: Any, x: Any, y: Any, *, scaled: bool) -> Callable[[], Any]:
    """The zero-argument training step of `model` on (x, y) with `opt` (`scaled`: `opt` scales the loss)."""

    def train() -> Any:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(x, training=True), tf.float32)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            target = opt.scale_loss(loss) if scaled else loss
        grads = tape.gradient(target, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return train
