"""Caffe prototxt (training net with Input layers and a solver) from a ModelSpec.

Caffe rounds pooling output sizes up; a spec pool that rounds down where the
two differ cannot be expressed and is refused. Weights use the xavier filler
(Caffe's default filler is constant zero).
"""

from __future__ import annotations

from dlperf.models import spec as S


def _layer(name: str, kind: str, bottoms: list[str], top: str, body: str = "") -> str:
    lines = [f'layer {{\n  name: "{name}"\n  type: "{kind}"']
    lines += [f'  bottom: "{b}"' for b in bottoms]
    lines.append(f'  top: "{top}"')
    if body:
        lines.append("  " + body)
    return "\n".join(lines) + "\n}\n"


_FILL = 'weight_filler { type: "xavier" } bias_filler { type: "constant" value: 0 }'


def net_prototxt(model: S.ModelSpec, batch: int, image_size: int | None = None) -> str:
    """The training net: data and label Input layers, the model, SoftmaxWithLoss."""
    size = image_size or model.image_size
    shapes = {li.name: li for li in S.layers(model, size)}
    out = [f'name: "{model.name}"\n',
           _layer("data", "Input", [], "data",
                  f"input_param {{ shape {{ dim: {batch} dim: {model.in_channels} dim: {size} dim: {size} }} }}"),
           _layer("label", "Input", [], "label", f"input_param {{ shape {{ dim: {batch} }} }}")]

    def emit(layers: tuple | list, bottom: str) -> str:
        for layer in layers:
            if isinstance(layer, S.Conv):
                out.append(_layer(layer.name, "Convolution", [bottom], layer.name,
                                  f"convolution_param {{ num_output: {layer.out} kernel_size: {layer.k} "
                                  f"stride: {layer.s} pad: {layer.p} group: {layer.groups} {_FILL} }}"))
                bottom = layer.name
                if layer.relu:
                    out.append(_layer(f"{layer.name}_relu", "ReLU", [bottom], bottom))
            elif isinstance(layer, S.Pool):
                li = shapes[layer.name]
                ceil_h = S.pool_out(li.in_shape[1], layer.k, layer.s, layer.p, True)
                if not layer.ceil and ceil_h != li.out_shape[1]:
                    raise ValueError(f"{layer.name}: Caffe rounds pooling up; this input size needs rounding down")
                kind = "MAX" if layer.kind == "max" else "AVE"
                out.append(_layer(layer.name, "Pooling", [bottom], layer.name,
                                  f"pooling_param {{ pool: {kind} kernel_size: {layer.k} stride: {layer.s} "
                                  f"pad: {layer.p} }}"))
                bottom = layer.name
            elif isinstance(layer, S.GlobalAvgPool):
                out.append(_layer(layer.name, "Pooling", [bottom], layer.name,
                                  "pooling_param { pool: AVE global_pooling: true }"))
                bottom = layer.name
            elif isinstance(layer, S.LRN):
                out.append(_layer(layer.name, "LRN", [bottom], layer.name,
                                  f"lrn_param {{ local_size: {layer.size} alpha: {layer.alpha} beta: {layer.beta} "
                                  f"k: {layer.k} }}"))
                bottom = layer.name
            elif isinstance(layer, S.Flatten):
                continue  # InnerProduct flattens its input in C, H, W order, as torch does
            elif isinstance(layer, S.Dropout):
                out.append(_layer(layer.name, "Dropout", [bottom], bottom,
                                  f"dropout_param {{ dropout_ratio: {layer.p} }}"))
            elif isinstance(layer, S.Linear):
                out.append(_layer(layer.name, "InnerProduct", [bottom], layer.name,
                                  f"inner_product_param {{ num_output: {layer.out} {_FILL} }}"))
                bottom = layer.name
                if layer.relu:
                    out.append(_layer(f"{layer.name}_relu", "ReLU", [bottom], bottom))
            elif isinstance(layer, S.Inception):
                tops = [emit(branch, bottom) for branch in layer.branches()]
                out.append(_layer(layer.name, "Concat", tops, layer.name))
                bottom = layer.name
            else:
                raise TypeError(f"unknown layer {layer!r}")
        return bottom

    last = emit(model.layers, "data")
    out.append(_layer("loss", "SoftmaxWithLoss", [last, "label"], "loss"))
    return "".join(out)


def solver_prototxt(net_path: str, lr: float, momentum: float, gpu: bool) -> str:
    return (f'net: "{net_path}"\nbase_lr: {lr}\nmomentum: {momentum}\nlr_policy: "fixed"\n'
            f"max_iter: 1000000000\ndisplay: 0\nsnapshot: 0\nsolver_mode: {'GPU' if gpu else 'CPU'}\n")
