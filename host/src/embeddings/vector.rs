//! Vectors as stored (little-endian `f32`s, 4 bytes each) and compared
//! (cosine similarity).

/// `v` as bytes.
pub fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Bytes back to a vector (None when the length is not a multiple of 4).
pub fn from_blob(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// Cosine similarity of `a` and `b` (0 when either is all zeros or their
/// lengths differ).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// A query ready to be compared with stored vectors without decoding
/// them: its values and its norm.
pub struct Query {
    values: Vec<f32>,
    norm: f32,
}

impl Query {
    pub fn new(values: Vec<f32>) -> Self {
        let norm = values.iter().map(|x| x * x).sum::<f32>().sqrt();
        Query { values, norm }
    }

    /// Cosine similarity with a stored vector (0 for one of another
    /// length, or all zeros).
    pub fn cosine_blob(&self, blob: &[u8]) -> f32 {
        if blob.len() != self.values.len() * 4 || self.norm == 0.0 {
            return 0.0;
        }
        let (mut dot, mut norm) = (0.0f32, 0.0f32);
        for (q, c) in self.values.iter().zip(blob.chunks_exact(4)) {
            let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            dot += q * x;
            norm += x * x;
        }
        if norm == 0.0 {
            0.0
        } else {
            dot / (self.norm * norm.sqrt())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_survive_storage_and_compare_by_angle() {
        let v = vec![0.5, -1.25, 3.0];
        assert_eq!(from_blob(&to_blob(&v)).unwrap(), v);
        assert!(from_blob(&[1, 2, 3]).is_none());
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-6);
        assert!(cosine(&[1.0, 0.0], &[0.0, 1.0]).abs() < 1e-6);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
        let q = Query::new(vec![3.0, 4.0]);
        assert!((q.cosine_blob(&to_blob(&[6.0, 8.0])) - 1.0).abs() < 1e-6);
        assert!(
            (q.cosine_blob(&to_blob(&[1.0, 2.0])) - cosine(&[3.0, 4.0], &[1.0, 2.0])).abs() < 1e-6
        );
    }
}
