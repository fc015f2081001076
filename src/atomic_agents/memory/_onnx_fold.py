"""The int8 model's weight decoding, done once per process instead of at every run.

The bundled model stores each weight matrix as int8 with a float scale, decoded in the graph:
``W = Cast(W_q) * W_scale``. An ONNX session built without graph optimisation (the quick one,
~50 ms) re-decodes all 22M weights at every run: 38 of the 52 ms a short query took, in ORT's
profile. The optimiser's constant folding removes that, but it costs ~170 ms of CPU per session.

:func:`fold_weights` does the decoding here, with numpy, and hands ORT a graph without it:

- a weight read by matrix products becomes a float32 initializer, computed as the graph would
  compute it (an exact int8-to-float cast, one float32 multiply per element, the same
  broadcasting), and given to the session as an external initializer (no protobuf copy);
- a weight read only by ``Gather`` (the token and position tables: 11.9M of the 22M values, of
  which a query reads a few rows) stays int8: the rows are gathered first, from the int8 table
  and its per-row scales, then decoded by the same ``Cast`` and ``Mul``. Decoding a row after
  gathering it gives the same floats as gathering it decoded.

So the folded graph computes the same numbers as the graph it came from, with the work of
decoding moved out of each run. The rest of the graph is untouched.

The ONNX protobuf is read and written by the few wire-format rules it needs (varints and
length-delimited fields): the ``onnx`` package (31 MB installed) takes ~1.5 s to import on our
2-core machine, to read 160 initializers and 400 nodes of a file whose bytes are pinned by
sha256 (``_embed``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np
else:
    from ._lazy import lazy_module

    np = lazy_module("numpy", globals(), "np")

__all__ = ["FoldError", "fold_weights"]

# Field numbers of onnx.proto3 (ModelProto, GraphProto, NodeProto, TensorProto, AttributeProto).
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP, _NODE_ATTRIBUTE = 1, 2, 3, 4, 5
_TENSOR_DIMS, _TENSOR_TYPE, _TENSOR_NAME, _TENSOR_RAW = 1, 2, 8, 9
_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 13, 14
_ATTR_NAME, _ATTR_I, _ATTR_TYPE = 1, 3, 20
_FLOAT, _INT8 = 1, 3  # TensorProto.DataType
_ATTR_INT = 2  # AttributeProto.AttributeType
_VARINT, _LEN = 0, 2  # wire types


class FoldError(ValueError):
    """The model file is not in the shape this fold reads (the caller falls back or reports it)."""


class _Field(NamedTuple):
    number: int
    wire: int
    start: int  # the field's first byte (its key)
    value: int  # the value's first byte
    end: int


def _varint(buf: memoryview, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(buf):
            raise FoldError("truncated varint")
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i
        if shift >= 70:  # a varint has at most 10 bytes (64 bits)
            raise FoldError("varint longer than 10 bytes")


def _fields(buf: memoryview) -> Iterator[_Field]:
    i, n = 0, len(buf)
    while i < n:
        start = i
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            _, end = _varint(buf, i)
        elif wire == _LEN:
            length, i = _varint(buf, i)
            end = i + length
        elif wire == 1:
            end = i + 8
        elif wire == 5:
            end = i + 4
        else:
            raise FoldError(f"unsupported wire type {wire}")
        if end > n:
            raise FoldError("field runs past its message")
        yield _Field(number, wire, start, i, end)
        i = end


def _enc_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _enc(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _enc_varint(number << 3 | _VARINT) + _enc_varint(payload)
    return _enc_varint(number << 3 | _LEN) + _enc_varint(len(payload)) + payload


class _Node(NamedTuple):
    op: str
    inputs: list[str]
    outputs: list[str]
    axis: int  # the ``axis`` attribute (0 when absent, ONNX's default for Gather)


def _text(buf: memoryview, f: _Field) -> str:
    return bytes(buf[f.value : f.end]).decode()


def _node(buf: memoryview) -> _Node:
    op, inputs, outputs, axis = "", [], [], 0
    for f in _fields(buf):
        if f.number == _NODE_INPUT:
            inputs.append(_text(buf, f))
        elif f.number == _NODE_OUTPUT:
            outputs.append(_text(buf, f))
        elif f.number == _NODE_OP:
            op = _text(buf, f)
        elif f.number == _NODE_ATTRIBUTE:
            attr = buf[f.value : f.end]
            name, value = "", 0
            for a in _fields(attr):
                if a.number == _ATTR_NAME:
                    name = _text(attr, a)
                elif a.number == _ATTR_I:
                    value = _varint(attr, a.value)[0]
            if name == "axis":
                axis = value
    return _Node(op, inputs, outputs, axis)


class _Tensor(NamedTuple):
    name: str
    dims: tuple[int, ...]
    dtype: int
    raw: memoryview | None


def _tensor(buf: memoryview) -> _Tensor:
    name, dims, dtype, raw = "", [], 0, None
    for f in _fields(buf):
        if f.number == _TENSOR_DIMS:
            if f.wire == _VARINT:
                dims.append(_varint(buf, f.value)[0])
            else:  # packed
                j = f.value
                while j < f.end:
                    d, j = _varint(buf, j)
                    dims.append(d)
        elif f.number == _TENSOR_TYPE:
            dtype = _varint(buf, f.value)[0]
        elif f.number == _TENSOR_NAME:
            name = _text(buf, f)
        elif f.number == _TENSOR_RAW:
            raw = buf[f.value : f.end]
    return _Tensor(name, tuple(dims), dtype, raw)


def _array(t: _Tensor, dtype: str) -> np.ndarray:
    if t.raw is None or len(t.raw) != int(np.prod(t.dims, dtype=np.int64)) * np.dtype(dtype).itemsize:
        raise FoldError(f"initializer {t.name} has no raw data of its shape")
    return np.frombuffer(t.raw, dtype=np.dtype(dtype).newbyteorder("<")).reshape(t.dims)


def _node_bytes(op: str, inputs: list[str], output: str, name: str, attrs: bytes = b"") -> bytes:
    body = b"".join(_enc(_NODE_INPUT, i.encode()) for i in inputs) + _enc(_NODE_OUTPUT, output.encode())
    return _enc(_GRAPH_NODE, body + _enc(_NODE_NAME, name.encode()) + _enc(_NODE_OP, op.encode()) + attrs)


def _int_attr(name: str, value: int) -> bytes:
    return _enc(_NODE_ATTRIBUTE, _enc(_ATTR_NAME, name.encode()) + _enc(_ATTR_I, value) + _enc(_ATTR_TYPE, _ATTR_INT))


def fold_weights(data: bytes) -> tuple[bytes, dict[str, np.ndarray]]:
    """``(model bytes, external initializers)``: the model with its int8 weights decoded once.

    Pass the arrays to ``SessionOptions.add_external_initializers`` (they must outlive the
    session). Raises :class:`FoldError` if the file is not a model this reads.
    """
    buf = memoryview(data)
    top = list(_fields(buf))
    graphs = [f for f in top if f.number == _MODEL_GRAPH and f.wire == _LEN]
    if len(graphs) != 1:
        raise FoldError("no graph")
    g = buf[graphs[0].value : graphs[0].end]
    fields = list(_fields(g))
    inits = {t.name: (t, f) for f in fields if f.number == _GRAPH_INITIALIZER for t in [_tensor(g[f.value : f.end])]}
    nodes = [(_node(g[f.value : f.end]), f) for f in fields if f.number == _GRAPH_NODE]
    users: dict[str, list[_Node]] = {}
    for node, _ in nodes:
        for name in node.inputs:
            users.setdefault(name, []).append(node)
    producer = {out: (node, f) for node, f in nodes for out in node.outputs}

    # Each decoded weight: Mul(Cast(int8 initializer), float initializer), nothing else reading the parts.
    decoded: dict[str, tuple[_Tensor, _Tensor, _Field, _Field]] = {}  # Mul output -> (q, scale, cast, mul)
    for node, f in nodes:
        if node.op != "Mul" or len(node.inputs) != 2 or len(node.outputs) != 1:
            continue
        cast_out, scale_name = node.inputs
        cast = producer.get(cast_out)
        if cast is None or cast[0].op != "Cast" or len(cast[0].inputs) != 1 or scale_name not in inits:
            continue
        q_name = cast[0].inputs[0]
        q, scale = inits.get(q_name, (None, None))[0], inits[scale_name][0]
        if q is None or q.dtype != _INT8 or scale.dtype != _FLOAT:
            continue
        if len(users[q_name]) != 1 or len(users[cast_out]) != 1 or len(users[scale_name]) != 1:
            continue
        decoded[node.outputs[0]] = (q, scale, cast[1], f)

    drop: set[int] = set()  # start offsets of the graph fields left out
    gathers: dict[int, bytes] = {}  # a Gather's start offset -> the nodes replacing it
    external: dict[str, np.ndarray] = {}
    for weight, (q, scale, cast_f, mul_f) in decoded.items():
        readers = users.get(weight, [])
        rows = q.dims[0] if q.dims else -1
        by_row = (
            readers
            and all(r.op == "Gather" and r.axis == 0 and r.inputs[0] == weight and weight not in r.inputs[1:] for r in readers)
            and len(scale.dims) == len(q.dims) == 2
            and scale.dims == (rows, 1)
        )
        drop |= {cast_f.start, mul_f.start}
        if by_row:  # gather int8 rows and their scales, then decode them
            for k, (node, f) in enumerate((n, f) for n, f in nodes if n.op == "Gather" and n.inputs[0] == weight):
                out, idx = node.outputs[0], node.inputs[1]
                tag = f"{out}__fold{k}"
                gathers[f.start] = b"".join(
                    (
                        _node_bytes("Gather", [q.name, idx], f"{tag}_q", f"{tag}_gq", _int_attr("axis", 0)),
                        _node_bytes("Gather", [scale.name, idx], f"{tag}_s", f"{tag}_gs", _int_attr("axis", 0)),
                        _node_bytes("Cast", [f"{tag}_q"], f"{tag}_f", f"{tag}_cast", _int_attr("to", _FLOAT)),
                        _node_bytes("Mul", [f"{tag}_f", f"{tag}_s"], out, f"{tag}_mul"),
                    )
                )
            continue
        # Cast then Mul, as the graph does them: an exact int8-to-float32 cast, one float32 product.
        qa, sa = _array(q, "i1"), _array(scale, "f4")
        try:  # the scale must fit the weight: a product as big as the weight, never a larger broadcast
            fits = np.broadcast_shapes(qa.shape, sa.shape) == qa.shape
        except ValueError:
            fits = False
        if not fits:
            raise FoldError(f"scale {scale.name} does not fit weight {q.name}")
        external[weight] = np.multiply(qa, sa, dtype=np.float32)
        drop |= {inits[q.name][1].start, inits[scale.name][1].start}
    if not external and not gathers:
        raise FoldError("no int8 weight to fold")

    # The new graph as a list of pieces (views of the file where unchanged), copied once, by the join.
    pieces: list[bytes | memoryview] = []
    for f in fields:
        if f.start in gathers:
            pieces.append(gathers[f.start])
        elif f.start not in drop:
            pieces.append(g[f.start : f.end])
    for name, value in external.items():
        tensor = b"".join(_enc(_TENSOR_DIMS, d) for d in value.shape)
        tensor += _enc(_TENSOR_TYPE, _FLOAT) + _enc(_TENSOR_NAME, name.encode())
        tensor += _enc(_TENSOR_EXTERNAL_DATA, _enc(1, b"location") + _enc(2, b"folded"))  # StringStringEntryProto
        tensor += _enc(_TENSOR_DATA_LOCATION, 1)  # EXTERNAL: given in memory to the session
        pieces.append(_enc(_GRAPH_INITIALIZER, tensor))
    size = sum(len(x) for x in pieces)
    model: list[bytes | memoryview] = []
    for f in top:
        if f.start == graphs[0].start:
            model += [_enc_varint(_MODEL_GRAPH << 3 | _LEN) + _enc_varint(size), *pieces]
        else:
            model.append(buf[f.start : f.end])
    return b"".join(model), external
