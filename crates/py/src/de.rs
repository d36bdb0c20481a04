//! Python values as serde input: a dict, list, tuple, str, int, float, bool or None is read by a
//! `Deserialize` type of the crates (the queue spec, `sim::net::queue::QueueSpec`), so the
//! crate's type, not the bindings, says which keys, types and defaults a value may have, and
//! its errors say where (the crate tracks the path). Integers and floats of other types (numpy's)
//! are read through `__index__` and `__float__`, as PyO3's own conversions read them.
//!
//! Other sequences (numpy arrays, ranges) read as lists and numpy bools as bools, as PyO3's own
//! extraction reads them.
//!
//! Nothing is converted ahead: a value is read only as far as the type asks for it, so a dict
//! that contains itself is followed only until the type's own bound stops it. Whatever the type,
//! dicts and lists nested deeper than [`MAX_DEPTH`] are refused (serde_json's bound), and one
//! value has at most [`MAX_PARTS`] entries and items in all.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::de::{self, DeserializeSeed, Expected, IntoDeserializer, MapAccess, SeqAccess};
use serde::de::{Unexpected, Visitor};
use std::cell::Cell;
use std::fmt;
use std::rc::Rc;

/// The deepest nesting of dicts and lists read.
pub const MAX_DEPTH: usize = 128;

/// The most dict entries and list items one value may have, all levels together. A reader that
/// keeps what it reads (a spec buffers the keys before `kind`) would otherwise expand a list that
/// holds itself twice, 40 levels deep (41 Python objects), into 2^40 values and abort the
/// interpreter on allocation failure (review of issue 14).
pub const MAX_PARTS: usize = 100_000;

/// A problem reading a value; the crate's reader adds the path.
#[derive(Debug)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }

    /// serde's words for what was found, in Python's: None, dict, list.
    fn invalid_type(found: Unexpected, exp: &dyn Expected) -> Self {
        let found = match found {
            Unexpected::Unit | Unexpected::Option => "None".to_string(),
            Unexpected::Map => "dict".to_string(),
            Unexpected::Seq => "list".to_string(),
            other => other.to_string(),
        };
        Error(format!("invalid type: {found}, expected {exp}"))
    }
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Self {
        Error(e.to_string())
    }
}

/// A Python value to be read by a `Deserialize` type.
pub struct Value<'py> {
    obj: Bound<'py, PyAny>,
    depth: usize,
    /// Parts left to read, shared by every part of one top-level value ([`MAX_PARTS`]).
    parts: Rc<Cell<usize>>,
}

/// Counts one more part read.
fn take_part(parts: &Cell<usize>) -> Result<(), Error> {
    match parts.get().checked_sub(1) {
        Some(left) => {
            parts.set(left);
            Ok(())
        }
        None => Err(too_many_parts()),
    }
}

fn too_many_parts() -> Error {
    Error(format!(
        "the value has more than {MAX_PARTS} dict entries and list items"
    ))
}

impl<'py> Value<'py> {
    pub fn new(obj: &Bound<'py, PyAny>) -> Self {
        Value {
            obj: obj.clone(),
            depth: 0,
            parts: Rc::new(Cell::new(MAX_PARTS)),
        }
    }

    fn nested(&self) -> Result<(), Error> {
        if self.depth >= MAX_DEPTH {
            return Err(Error(format!(
                "dicts and lists nest deeper than {MAX_DEPTH} levels"
            )));
        }
        Ok(())
    }

    /// A dict's entries, the keys named in `first` first (in that order), then the others in
    /// the dict's order: a reader that wants one key before the rest (a spec's `kind`) gets it.
    fn entries(&self, d: &Bound<'py, PyDict>, first: &[&str]) -> Result<Entries<'py>, Error> {
        self.nested()?;
        let mut items: Vec<_> = d
            .items()
            .iter()
            .map(|kv| kv.extract())
            .collect::<PyResult<_>>()?;
        if !first.is_empty() {
            let rank = |k: &Bound<'py, PyAny>| {
                k.cast::<PyString>()
                    .ok()
                    .and_then(|s| s.to_cow().ok().map(|s| s.into_owned()))
                    .and_then(|s| first.iter().position(|f| *f == s))
                    .unwrap_or(first.len())
            };
            items.sort_by_cached_key(|(k, _)| rank(k));
        }
        Ok(Entries {
            items: items.into_iter(),
            value: None,
            depth: self.depth + 1,
            parts: self.parts.clone(),
        })
    }

    fn items(&self, items: Vec<Bound<'py, PyAny>>) -> Result<Items<'py>, Error> {
        self.nested()?;
        if items.len() > self.parts.get() {
            return Err(too_many_parts());
        }
        Ok(Items {
            items: items.into_iter(),
            depth: self.depth + 1,
            parts: self.parts.clone(),
        })
    }
}

/// A value's `str()` for an error message, cut short.
fn short(o: &Bound<'_, PyAny>) -> String {
    const MAX: usize = 60;
    let s = o.to_string();
    if s.chars().count() > MAX {
        s.chars().take(MAX).collect::<String>() + "..."
    } else {
        s
    }
}

/// An integer: 64 bits hold every one the crates read.
fn int<'de, V: Visitor<'de>>(o: &Bound<'_, PyAny>, v: V) -> Result<V::Value, Error> {
    if let Ok(x) = o.extract::<i64>() {
        v.visit_i64(x)
    } else if let Ok(x) = o.extract::<u64>() {
        v.visit_u64(x)
    } else if let (false, Ok(x)) = (o.is_instance_of::<PyInt>(), o.extract::<f64>()) {
        // A value whose __index__ refuses but __float__ answers (a 0-d numpy array): a float, as
        // PyO3's f64 extraction reads it. (A Python int beyond 64 bits stays an integer error.)
        v.visit_f64(x)
    } else {
        Err(de::Error::invalid_value(
            Unexpected::Other(&format!("integer {}", short(o))),
            &v,
        ))
    }
}

impl<'de, 'py> de::Deserializer<'de> for Value<'py> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        let o = &self.obj;
        if o.is_none() {
            v.visit_unit()
        } else if let Ok(b) = o.cast::<PyBool>() {
            v.visit_bool(b.is_true())
        } else if o.is_instance_of::<PyInt>() {
            int(o, v)
        } else if let Ok(f) = o.cast::<PyFloat>() {
            v.visit_f64(f.value())
        } else if let Ok(s) = o.cast::<PyString>() {
            v.visit_str(&s.to_cow()?)
        } else if let Ok(d) = o.cast::<PyDict>() {
            v.visit_map(self.entries(d, &[])?)
        } else if let Ok(l) = o.cast::<PyList>() {
            v.visit_seq(self.items(l.iter().collect())?)
        } else if let Ok(t) = o.cast::<PyTuple>() {
            v.visit_seq(self.items(t.iter().collect())?)
        } else if let Ok(b) = o.extract::<bool>() {
            v.visit_bool(b) // numpy.bool_, as PyO3's bool extraction reads it
        } else if o.len().is_ok() && o.hasattr("__getitem__")? {
            // Other sequences (a numpy array, a range, bytes), as PyO3's Vec extraction reads
            // them; their length is bounded by MAX_PARTS as they are read.
            let items = o
                .try_iter()?
                .take(self.parts.get() + 1)
                .collect::<PyResult<Vec<_>>>()?;
            v.visit_seq(self.items(items)?)
        } else if o.hasattr("__index__")? {
            int(o, v)
        } else if let Ok(x) = o.extract::<f64>() {
            v.visit_f64(x)
        } else {
            Err(Error(format!(
                "unsupported value {} of type {}: expected a dict, list, str, int, float, bool \
                 or None",
                short(o),
                o.get_type().name()?
            )))
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        if self.obj.is_none() {
            v.visit_none()
        } else {
            v.visit_some(self)
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        match self.obj.cast::<PyDict>() {
            Ok(d) => v.visit_map(self.entries(d, fields)?),
            Err(_) => self.deserialize_any(v),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_newtype_struct(self)
    }

    /// Unit variants, by name.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        match self.obj.cast::<PyString>() {
            Ok(s) => v.visit_enum(s.to_cow()?.into_owned().into_deserializer()),
            Err(_) => self.deserialize_any(v),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map identifier ignored_any
    }
}

/// A dict's entries; each value is read after its key.
struct Entries<'py> {
    items: std::vec::IntoIter<(Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    value: Option<Bound<'py, PyAny>>,
    depth: usize,
    parts: Rc<Cell<usize>>,
}

impl<'de, 'py> MapAccess<'de> for Entries<'py> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((k, v)) = self.items.next() else {
            return Ok(None);
        };
        take_part(&self.parts)?;
        self.value = Some(v);
        seed.deserialize(Value {
            obj: k,
            depth: self.depth,
            parts: self.parts.clone(),
        })
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let v = self
            .value
            .take()
            .ok_or_else(|| Error("a value read before its key".into()))?;
        seed.deserialize(Value {
            obj: v,
            depth: self.depth,
            parts: self.parts.clone(),
        })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// A list's or tuple's items.
struct Items<'py> {
    items: std::vec::IntoIter<Bound<'py, PyAny>>,
    depth: usize,
    parts: Rc<Cell<usize>>,
}

impl<'de, 'py> SeqAccess<'de> for Items<'py> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        match self.items.next() {
            Some(obj) => {
                take_part(&self.parts)?;
                seed.deserialize(Value {
                    obj,
                    depth: self.depth,
                    parts: self.parts.clone(),
                })
                .map(Some)
            }
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}
