"""An object's attributes as a task's payload carries them, kept fast at both ends.

CPython 3.11 and 3.12 keep an instance's attributes in *inline values* beside the
object, and their specialized bytecodes (a method call, an attribute read) work only
while the object has no ``__dict__`` made for it. Pickle makes one at both ends: the
sender reads ``obj.__dict__`` for the state, the receiver fills ``obj.__dict__`` in
its ``BUILD``. From then on every method call on the object takes the generic path:
40 ns against 28 ns a call on 3.11 here, 65 ns against 29 on 3.12 (3.13: 26 either
way), and UTS T3, whose nodes call two methods of the tree
object every task receives, spent 5-8% more CPU in a leaf than in its elision
(``perf``: ``_PyObject_GenericGetAttrWithDict``, absent from the elision's profile).

So a task's payload (``dac.serialize.dumps_payload``) pickles a plain object's state
with ``reduce`` here: the receiver sets each attribute with ``object.__setattr__``
(``restore``, pickle's ``state_setter``), which keeps the values inline, and the
sender reads them by name where it knows the names of the object's class (from an
object of the class sent or received before) and can check that they are all of it:
``gc.get_referents`` lists an inline object's values and its class without making a
dict, so the names read must give exactly those objects. Otherwise the sender reads
``__dict__`` as pickle does (once per object: a dict made stays made).

Only a plain class qualifies (``_fit``): every class of its MRO but ``object`` written
in Python, no ``__slots__``, pickle's default reduction (no ``__reduce__``,
``__getstate__``, ``__setstate__`` or ``__getnewargs__`` of its own), and no state key
that a data descriptor of the class (a property with a setter) would intercept, as
``BUILD``, which writes the dict, does not. The object is made as pickle makes it
(``copyreg.__newobj__``) and is in the stream's memo before its state is, so cycles
work as before. On other Pythons ``reduce`` leaves every object to pickle (3.10 has no
specialization, 3.13 keeps the values inline under a dict).

What the check cannot see: an object that lost an attribute its class also holds (a
class attribute, say a dataclass field's default) and gained another holding that very
same object. It would travel with the first name and not the second.
"""

from __future__ import annotations

import copyreg
import gc
import sys
import weakref
from typing import Any

# the interpreters whose specializations a made __dict__ defeats
APPLIES = (3, 11) <= sys.version_info[:2] < (3, 13)
_MANAGED_DICT = 1 << 4          # Py_TPFLAGS_MANAGED_DICT (3.11, 3.12)
_HEAPTYPE = 1 << 9              # Py_TPFLAGS_HEAPTYPE: a class written in Python
_OWN_HOOKS = ("__setstate__", "__getnewargs__", "__getnewargs_ex__")
_NEWOBJ = getattr(copyreg, "__newobj__")   # (pickle writes its call as NEWOBJ)
_set = object.__setattr__
_get = object.__getattribute__
_intern = sys.intern

# per class: the names of its data descriptors (``object``'s ``__class__`` among
# them), or None where it does not qualify
_FIT: weakref.WeakKeyDictionary[type, frozenset[str] | None] = weakref.WeakKeyDictionary()
# per class: the attribute names of the last object of it sent or received
_NAMES: weakref.WeakKeyDictionary[type, tuple[str, ...]] = weakref.WeakKeyDictionary()


def reduce(obj: Any) -> Any:
    """For a ``reducer_override``: ``obj``'s reduction with ``restore`` as its state
    setter, or ``NotImplemented`` (pickle's own) where ``obj`` does not qualify."""
    cls = type(obj)
    try:
        guarded = _FIT[cls]
    except KeyError:
        guarded = _FIT[cls] = _fit(cls)
        if guarded is not None and cls not in _NAMES:
            _NAMES[cls] = _field_names(cls)
    if guarded is None:
        return NotImplemented
    state = _read(obj, cls, guarded)
    if state is None or not guarded.isdisjoint(state):
        return NotImplemented
    return _NEWOBJ, (cls,), state, None, None, restore


def restore(obj: Any, state: dict[str, Any]) -> None:
    """Set ``state`` on a newly made ``obj`` attribute by attribute (the values stay
    inline; the names are interned as ``BUILD`` interns them)."""
    for name, value in state.items():
        _set(obj, _intern(name), value)
    cls = type(obj)
    if cls not in _NAMES:
        _NAMES[cls] = tuple(state)


def has_inline_values(obj: Any) -> bool:
    """On 3.11 and 3.12: no ``__dict__`` was made for ``obj`` (for tests and
    benchmarks). ``gc.get_referents`` shows a made dict in place of the values: a
    dict there whose items are all ``obj``'s own attributes (an object with no
    attribute reads as inline either way)."""
    for r in gc.get_referents(obj):
        if type(r) is dict and r and all(
                type(k) is str and _get(obj, k) is v for k, v in r.items()):
            return False
    return True


def _read(obj: Any, cls: type, guarded: frozenset[str]) -> dict[str, Any] | None:
    """``obj``'s attributes by their names where the class's known names are all of
    them (see the module's docstring), else its ``__dict__`` (made if it was not);
    None where a key is not a string. A known name that a data descriptor of the
    class holds is not read (its getter would run)."""
    names = _NAMES.get(cls)
    if names is not None and guarded.isdisjoint(names):
        try:
            values = [_get(obj, name) for name in names]
        except AttributeError:
            values = None
        if values is not None:
            refs = gc.get_referents(obj)
            values.append(cls)
            if len(refs) == len(values) and \
                    sorted(map(id, refs)) == sorted(map(id, values)):
                values.pop()
                return dict(zip(names, values))
    state = _get(obj, "__dict__")
    if not all(type(k) is str for k in state):
        return None
    _NAMES[cls] = tuple(state)
    return state


def _field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names (its objects' attributes unless they were given
    others: ``_read`` checks), else none."""
    fields = getattr(cls, "__dataclass_fields__", None)
    dataclasses = sys.modules.get("dataclasses")
    if type(fields) is not dict or dataclasses is None:
        return ()
    kind = getattr(dataclasses, "_FIELD", None)
    return tuple(n for n, f in fields.items() if getattr(f, "_field_type", None) is kind)


def _fit(cls: type) -> frozenset[str] | None:
    """The names of ``cls``'s data descriptors if its objects qualify (see the
    module's docstring), else None."""
    if not APPLIES or not cls.__flags__ & _MANAGED_DICT:
        return None
    mro = cls.__mro__
    if any(c is not object and not c.__flags__ & _HEAPTYPE for c in mro) or \
            any("__slots__" in vars(c) for c in mro):
        return None
    if cls.__reduce_ex__ is not object.__reduce_ex__ or \
            cls.__reduce__ is not object.__reduce__ or \
            getattr(cls, "__getstate__", None) is not getattr(object, "__getstate__", None) \
            or any(hasattr(cls, hook) for hook in _OWN_HOOKS):
        return None
    return frozenset(name for c in mro for name, v in vars(c).items()   # (__class__ too)
                     if hasattr(type(v), "__set__") or hasattr(type(v), "__delete__"))
