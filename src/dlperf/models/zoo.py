"""The four networks, each following one published reference definition (named in its docstring)."""

from __future__ import annotations

from dlperf.models.spec import (
    LRN,
    Conv,
    Dropout,
    Flatten,
    GlobalAvgPool,
    Inception,
    Linear,
    ModelSpec,
    Pool,
)


def alexnet(num_classes: int = 1000) -> ModelSpec:
    """AlexNet as Caffe's `bvlc_alexnet` (Krizhevsky et al. 2012, two-group convolutions 2, 4 and 5).

    Input 3x227x227; LRN before pooling. Published parameter count, 1000
    classes: 60,965,224 (conv 2,334,080 + fully connected 58,631,144).
    """
    return ModelSpec(
        name="alexnet", reference="BVLC Caffe models/bvlc_alexnet (Krizhevsky, Sutskever, Hinton 2012)",
        published_params=60_965_224, published_params_classes=1000, in_channels=3, image_size=227,
        num_classes=num_classes, layers=(
            Conv("conv1", 96, 11, s=4), LRN("norm1"), Pool("pool1", "max", 3, 2, ceil=True),
            Conv("conv2", 256, 5, p=2, groups=2), LRN("norm2"), Pool("pool2", "max", 3, 2, ceil=True),
            Conv("conv3", 384, 3, p=1), Conv("conv4", 384, 3, p=1, groups=2), Conv("conv5", 256, 3, p=1, groups=2),
            Pool("pool5", "max", 3, 2, ceil=True), Flatten(),
            Linear("fc6", 4096), Dropout("drop6"), Linear("fc7", 4096), Dropout("drop7"),
            Linear("fc8", num_classes, relu=False),
        ))


def caffenet(num_classes: int = 1000) -> ModelSpec:
    """CaffeNet: Caffe's `bvlc_reference_caffenet`, AlexNet with pooling before normalisation.

    Input 3x227x227. Same weights as AlexNet, so the same published count for
    1000 classes: 60,965,224.
    """
    return ModelSpec(
        name="caffenet", reference="BVLC Caffe models/bvlc_reference_caffenet",
        published_params=60_965_224, published_params_classes=1000, in_channels=3, image_size=227,
        num_classes=num_classes, layers=(
            Conv("conv1", 96, 11, s=4), Pool("pool1", "max", 3, 2, ceil=True), LRN("norm1"),
            Conv("conv2", 256, 5, p=2, groups=2), Pool("pool2", "max", 3, 2, ceil=True), LRN("norm2"),
            Conv("conv3", 384, 3, p=1), Conv("conv4", 384, 3, p=1, groups=2), Conv("conv5", 256, 3, p=1, groups=2),
            Pool("pool5", "max", 3, 2, ceil=True), Flatten(),
            Linear("fc6", 4096), Dropout("drop6"), Linear("fc7", 4096), Dropout("drop7"),
            Linear("fc8", num_classes, relu=False),
        ))


def googlenet(num_classes: int = 1000) -> ModelSpec:
    """GoogLeNet (Inception v1) as Caffe's `bvlc_googlenet`, without the two auxiliary heads.

    Input 3x224x224; no batch norm; true 5x5 convolutions; LRN after the first
    two stages; the final 7x7 average pool is a global average pool (the same at
    224, and defined at smaller sizes). Parameter count for 1000 classes:
    6,998,552 (the main tower of bvlc_googlenet; Szegedy et al. 2014, Table 1,
    round it to 6.8M before the classifier).
    """
    return ModelSpec(
        name="googlenet", reference="BVLC Caffe models/bvlc_googlenet (Szegedy et al. 2014), auxiliary heads omitted",
        published_params=6_998_552, published_params_classes=1000, in_channels=3, image_size=224,
        num_classes=num_classes, layers=(
            Conv("conv1_7x7_s2", 64, 7, s=2, p=3), Pool("pool1_3x3_s2", "max", 3, 2, ceil=True), LRN("pool1_norm1"),
            Conv("conv2_3x3_reduce", 64, 1), Conv("conv2_3x3", 192, 3, p=1), LRN("conv2_norm2"),
            Pool("pool2_3x3_s2", "max", 3, 2, ceil=True),
            Inception("inception_3a", 64, 96, 128, 16, 32, 32),
            Inception("inception_3b", 128, 128, 192, 32, 96, 64),
            Pool("pool3_3x3_s2", "max", 3, 2, ceil=True),
            Inception("inception_4a", 192, 96, 208, 16, 48, 64),
            Inception("inception_4b", 160, 112, 224, 24, 64, 64),
            Inception("inception_4c", 128, 128, 256, 24, 64, 64),
            Inception("inception_4d", 112, 144, 288, 32, 64, 64),
            Inception("inception_4e", 256, 160, 320, 32, 128, 128),
            Pool("pool4_3x3_s2", "max", 3, 2, ceil=True),
            Inception("inception_5a", 256, 160, 320, 32, 128, 128),
            Inception("inception_5b", 384, 192, 384, 48, 128, 128),
            GlobalAvgPool("pool5"), Flatten(), Dropout("drop5", 0.4),
            Linear("loss3_classifier", num_classes, relu=False),
        ))


def lenet5(num_classes: int = 10) -> ModelSpec:
    """LeNet-5 (LeCun et al. 1998) in its common modern form, for quick runs.

    Input 1x32x32; C3 fully connected to S2 (not the paper's partial table),
    max pooling, ReLU. Parameter count for 10 classes: 61,706 (the paper's
    partial-C3 original has about 60,000).
    """
    return ModelSpec(
        name="lenet5", reference="LeCun et al. 1998, modern variant (full C3, max pool, ReLU)",
        published_params=61_706, published_params_classes=10, in_channels=1, image_size=32,
        num_classes=num_classes, layers=(
            Conv("conv1", 6, 5), Pool("pool1", "max", 2, 2), Conv("conv2", 16, 5), Pool("pool2", "max", 2, 2),
            Flatten(), Linear("fc1", 120), Linear("fc2", 84), Linear("fc3", num_classes, relu=False),
        ))


MODELS = {"alexnet": alexnet, "caffenet": caffenet, "googlenet": googlenet, "lenet5": lenet5}
