# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled ``encode_columns`` of ``spark_sink.records``: the same bytes, in the
same parts, as the Python one (``records.python_encode_columns``), which stays the
fallback and the reference (see records.py for the layout and the switch).

What it does in C: one pass over the Contexts reading each field once (a ``Context``'s
fields straight from its ``__slots__``, where CPython's member descriptors say they
are; any other object by name), the id, time,
QoS and retain columns written straight into their bytes, the origin column (uint16
numbers by identity, in order of first appearance), and the int32 offsets columns of
the topics, payloads and origin names. The rare columns (MQTT 5 properties, metadata
JSON, non-ASCII strings) call records.py's Python helpers.
"""

import sys

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t

from broker_core.context import EMPTY_META, Context
from broker_core.mqtt.properties import EMPTY

# records.py imports this module at its end: it is whole by the time a batch is encoded.
from spark_sink import records as _py

if sys.byteorder != "little":  # the columns are written in the machine's order
    raise ImportError("the compiled stream encoder writes little-endian machines only")

__all__ = ["API", "encode_columns", "reads_slots"]

#: The version of ``encode_columns``'s arguments (2: ``offset``); records.py uses a
#: build of another version (one not rebuilt since the source changed) as not built.
API = 2

cdef bytes _PAD = bytes(8)


cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
    int T_OBJECT_EX

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member


cdef Py_ssize_t _slot_offset(str name) except -2:
    """Where ``Context`` keeps field ``name`` in its object (its ``__slots__``): -1 if it
    is not a plain slot (then the encoder reads it by name)."""
    descriptor = Context.__dict__.get(name)
    if type(descriptor).__name__ != "member_descriptor":
        return -1
    cdef PyMemberDef* member = (<PyMemberDescrObject*>descriptor).d_member
    return member.offset if member.type == T_OBJECT_EX else -1


#: The slots of the fields read per message: a ``Context`` (the exact class) is read
#: there directly, a pointer each, instead of by name through its descriptor.
cdef Py_ssize_t _ID = _slot_offset("id")
cdef Py_ssize_t _TS = _slot_offset("received_at")
cdef Py_ssize_t _QOS = _slot_offset("qos")
cdef Py_ssize_t _RETAIN = _slot_offset("retain")
cdef Py_ssize_t _ORIGIN = _slot_offset("origin")
cdef Py_ssize_t _TOPIC = _slot_offset("topic")
cdef Py_ssize_t _PAYLOAD = _slot_offset("payload")
cdef Py_ssize_t _PROPERTIES = _slot_offset("properties")
cdef Py_ssize_t _META = _slot_offset("meta")
cdef bint _SLOTS = min(_ID, _TS, _QOS, _RETAIN, _ORIGIN, _TOPIC, _PAYLOAD, _PROPERTIES, _META) >= 0
cdef object _CONTEXT = Context


def reads_slots():
    """Whether ``Context`` fields are read from their slots (else by name)."""
    return _SLOTS


cdef inline object _field(object c, Py_ssize_t offset, str name):
    """Field ``name`` of ``c``, at ``offset`` when ``c`` is a ``Context``."""
    cdef PyObject* value
    if _SLOTS and type(c) is _CONTEXT:
        value = (<PyObject**>((<char*><PyObject*>c) + offset))[0]
        if value is not NULL:
            return <object>value
    return getattr(c, name)


cdef Py_ssize_t _padded(list parts, Py_ssize_t size):
    cdef Py_ssize_t pad = -size % 8
    if pad < 0:
        pad += 8
    if pad:
        parts.append(_PAD[:pad])
    return size + pad


cdef bytes _offsets(list values):
    """The int32 running sums of the sizes of ``values`` (``count + 1`` of them)."""
    cdef Py_ssize_t count = len(values), i
    cdef bytes raw = PyBytes_FromStringAndSize(NULL, 4 * (count + 1))
    cdef int32_t* out = <int32_t*>PyBytes_AS_STRING(raw)
    cdef int64_t total = 0
    out[0] = 0
    for i in range(count):
        total += len(values[i])
        if total > 0x7FFFFFFF:
            raise OverflowError("a column of the batch holds more than 2 GiB")
        out[i + 1] = <int32_t>total
    return raw


cdef Py_ssize_t _var(bytes data, list values, list parts):
    cdef bytes raw = _offsets(values)
    parts.append(raw)
    parts.append(data)
    return _padded(parts, len(raw) + len(data))


cdef Py_ssize_t _strings(list values, list parts, object joined=None):
    if joined is None:
        joined = "".join(values)
    if joined.isascii():
        return _var(joined.encode("ascii"), values, parts)
    cdef list encoded = [value.encode("utf-8", "surrogatepass") for value in values]
    return _var(b"".join(encoded), encoded, parts)


cdef Py_ssize_t _empty(Py_ssize_t count, list parts):
    parts.append(bytes(4 * (count + 1)))
    return _padded(parts, 4 * (count + 1))


def encode_columns(contexts, topics=None, joined=None, payloads=None, int64_t offset=0):
    """``records.encode_columns``: the columns of ``contexts`` (see records.py); ``offset``
    is added to every ``received_at``."""
    cdef Py_ssize_t count = len(contexts), i, size, number
    cdef bytes ids = PyBytes_FromStringAndSize(NULL, 8 * count)
    cdef bytes ts = PyBytes_FromStringAndSize(NULL, 8 * count)
    cdef bytes flags = PyBytes_FromStringAndSize(NULL, 2 * count)
    cdef bytes index = PyBytes_FromStringAndSize(NULL, 2 * count)
    cdef int64_t* id_out = <int64_t*>PyBytes_AS_STRING(ids)
    cdef int64_t* ts_out = <int64_t*>PyBytes_AS_STRING(ts)
    cdef uint8_t* qos_out = <uint8_t*>PyBytes_AS_STRING(flags)
    cdef uint8_t* retain_out = qos_out + count
    cdef uint16_t* index_out = <uint16_t*>PyBytes_AS_STRING(index)
    cdef int64_t t, ts_max = 0
    cdef bint plain = True, bare = True
    cdef bint own_topics = topics is None, own_payloads = payloads is None
    cdef uint16_t code = 0
    cdef list names = []
    cdef dict codes = {}
    cdef object c, origin, last = None, p, m
    cdef list properties
    if own_topics:
        topics = []
    if own_payloads:
        payloads = []
    for i in range(count):
        c = contexts[i]
        id_out[i] = _field(c, _ID, "id")
        t = _field(c, _TS, "received_at")
        t += offset
        ts_out[i] = t
        if i == 0 or t > ts_max:
            ts_max = t
        qos_out[i] = _field(c, _QOS, "qos")
        retain_out[i] = _field(c, _RETAIN, "retain")
        origin = _field(c, _ORIGIN, "origin")
        if origin is not last or i == 0:
            number = codes.get(id(origin), -1)
            if number < 0:
                number = len(names)
                if number > 0xFFFF:
                    raise OverflowError("more than 65536 origins in one batch")
                codes[id(origin)] = number
                names.append(origin)
            code = <uint16_t>number
            last = origin
        index_out[i] = code
        if own_topics:
            topics.append(_field(c, _TOPIC, "topic"))
        if own_payloads:
            payloads.append(_field(c, _PAYLOAD, "payload"))
        if plain:
            p = _field(c, _PROPERTIES, "properties")
            if p is not EMPTY and p != EMPTY:
                plain = False
        if bare:
            m = _field(c, _META, "meta")
            if m is not EMPTY_META and m != EMPTY_META:
                bare = False
    cdef list parts = [ids, ts, flags, index]
    size = _padded(parts, 20 * count)
    parts.append(len(names).to_bytes(8, "little"))
    size += 8
    size += _strings([o.protocol for o in names], parts)
    size += _strings([o.name for o in names], parts)
    size += _strings(topics, parts, joined)
    if plain:
        size += _empty(count, parts)
    else:  # read again: only a batch with MQTT 5 properties comes here
        properties = [x.properties for x in contexts]
        size += _strings([q.content_type or "" for q in properties], parts)
    size += _var(b"".join(payloads), payloads, parts)
    if plain:
        size += _empty(count, parts)
    else:
        blocks = [b"" if q is EMPTY else _py._block(q) for q in properties]
        size += _var(b"".join(blocks), blocks, parts)
    if bare:
        size += _empty(count, parts)
    else:
        metas = [x.meta for x in contexts]
        size += _strings([_py._meta_json(m) if m else "" for m in metas], parts)
    return _py.Encoded(parts, count, ts_max, size)
