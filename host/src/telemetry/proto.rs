//! The OTLP protobuf messages sandcrab sends, written by hand: the
//! encoding is small (varints, length-delimited fields, fixed 64-bit
//! times) and the field numbers are those of the official definitions
//! (`opentelemetry/proto/{common,resource,trace,metrics}/v1`), which the
//! tests decode the bytes with.

/// A protobuf message being written.
#[derive(Default)]
pub struct Message(Vec<u8>);

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const BYTES: u8 = 2;

impl Message {
    pub fn new() -> Self {
        Message::default()
    }

    /// The encoded bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint_raw((u64::from(field) << 3) | u64::from(wire));
    }

    fn varint_raw(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.0.push((n as u8) | 0x80);
            n >>= 7;
        }
        self.0.push(n as u8);
    }

    /// A varint field (int64, uint32, bool, enum); zero is left out as
    /// proto3 does.
    pub fn varint(&mut self, field: u32, n: u64) -> &mut Self {
        if n != 0 {
            self.key(field, VARINT);
            self.varint_raw(n);
        }
        self
    }

    /// A fixed64 field (times, counts, sfixed64, double bits); zero left out.
    pub fn fixed64(&mut self, field: u32, n: u64) -> &mut Self {
        if n != 0 {
            self.key(field, FIXED64);
            self.0.extend_from_slice(&n.to_le_bytes());
        }
        self
    }

    /// An sfixed64 field, written even when zero (inside a oneof).
    pub fn sfixed64(&mut self, field: u32, n: i64) -> &mut Self {
        self.key(field, FIXED64);
        self.0.extend_from_slice(&n.to_le_bytes());
        self
    }

    /// A double field, written even when zero (inside a oneof, zero is a
    /// value).
    pub fn double(&mut self, field: u32, value: f64) -> &mut Self {
        self.key(field, FIXED64);
        self.0.extend_from_slice(&value.to_bits().to_le_bytes());
        self
    }

    /// A bytes or string field; empty is left out.
    pub fn bytes(&mut self, field: u32, bytes: &[u8]) -> &mut Self {
        if !bytes.is_empty() {
            self.key(field, BYTES);
            self.varint_raw(bytes.len() as u64);
            self.0.extend_from_slice(bytes);
        }
        self
    }

    /// A string field; empty is left out.
    pub fn string(&mut self, field: u32, text: &str) -> &mut Self {
        self.bytes(field, text.as_bytes())
    }

    /// An embedded message field, written even when empty.
    pub fn message(&mut self, field: u32, inner: Message) -> &mut Self {
        self.key(field, BYTES);
        self.varint_raw(inner.0.len() as u64);
        self.0.extend_from_slice(&inner.0);
        self
    }

    /// A packed repeated fixed64 field.
    pub fn packed_fixed64(&mut self, field: u32, values: &[u64]) -> &mut Self {
        if !values.is_empty() {
            self.key(field, BYTES);
            self.varint_raw(values.len() as u64 * 8);
            for v in values {
                self.0.extend_from_slice(&v.to_le_bytes());
            }
        }
        self
    }

    /// A packed repeated double field.
    pub fn packed_double(&mut self, field: u32, values: &[f64]) -> &mut Self {
        let bits: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
        self.packed_fixed64(field, &bits)
    }
}

/// An attribute's value (`common.v1.AnyValue`).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Bool(bool),
    Int(i64),
    Double(f64),
    Strs(Vec<String>),
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<Vec<String>> for Value {
    fn from(v: Vec<String>) -> Self {
        Value::Strs(v)
    }
}

/// `common.v1.AnyValue`.
fn any_value(value: &Value) -> Message {
    let mut m = Message::new();
    match value {
        Value::Str(s) => {
            // string_value = 1, written even when empty.
            m.key(1, BYTES);
            m.varint_raw(s.len() as u64);
            m.0.extend_from_slice(s.as_bytes());
        }
        Value::Bool(b) => {
            m.key(2, VARINT);
            m.varint_raw(u64::from(*b));
        }
        Value::Int(i) => {
            m.key(3, VARINT);
            m.varint_raw(*i as u64);
        }
        Value::Double(d) => {
            m.double(4, *d);
        }
        Value::Strs(items) => {
            let mut array = Message::new();
            for item in items {
                array.message(1, any_value(&Value::Str(item.clone())));
            }
            m.message(5, array);
        }
    }
    m
}

/// `common.v1.KeyValue`.
pub fn key_value(key: &str, value: &Value) -> Message {
    let mut m = Message::new();
    m.string(1, key).message(2, any_value(value));
    m
}

/// Attributes as repeated KeyValue field `field` of `m`.
pub fn attributes(m: &mut Message, field: u32, attrs: &[(String, Value)]) {
    for (key, value) in attrs {
        m.message(field, key_value(key, value));
    }
}

/// An export request (traces' or metrics'): `items` (spans or metrics,
/// each field 2 of the scope's message) of sandcrab's instrumentation
/// scope, of the resource `attrs` describe. The two requests share this
/// shape: `{resource = 1, scope_X = 2 {scope = 1, X = 2}}` in field 1.
pub fn export_request(
    attrs: &[(String, Value)],
    items: impl IntoIterator<Item = Message>,
) -> Vec<u8> {
    let mut scope = Message::new();
    scope
        .string(1, "sandcrab")
        .string(2, env!("CARGO_PKG_VERSION"));
    let mut scoped = Message::new();
    scoped.message(1, scope);
    for item in items {
        scoped.message(2, item);
    }
    let mut resource = Message::new();
    attributes(&mut resource, 1, attrs);
    let mut of_resource = Message::new();
    of_resource.message(1, resource).message(2, scoped);
    let mut request = Message::new();
    request.message(1, of_resource);
    request.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_encode_as_protobuf_does() {
        let mut m = Message::new();
        m.varint(1, 150);
        assert_eq!(m.into_bytes(), [0x08, 0x96, 0x01]);
        let mut m = Message::new();
        m.string(2, "testing");
        assert_eq!(m.into_bytes(), b"\x12\x07testing");
        let mut m = Message::new();
        m.varint(1, 0).string(2, "");
        assert!(m.into_bytes().is_empty(), "proto3 leaves zero values out");
        let kv = key_value("k", &Value::Int(-1)).into_bytes();
        // key "k", then AnyValue { int_value = -1 } as a ten-byte varint.
        assert_eq!(&kv[..3], b"\x0a\x01k");
        assert_eq!(kv[3], 0x12);
        assert_eq!(kv.len(), 3 + 2 + 1 + 10);
    }
}
