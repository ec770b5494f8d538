//! Vectors as stored (little-endian `f32`s, 4 bytes each) and compared
//! (cosine similarity, read straight from the stored bytes).

/// `v` as bytes.
pub fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
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
        let v = [0.5, -1.25, 3.0];
        let blob = to_blob(&v);
        assert_eq!(blob.len(), 12);
        assert_eq!(&blob[4..8], &(-1.25f32).to_le_bytes());
        assert!((Query::new(v.to_vec()).cosine_blob(&blob) - 1.0).abs() < 1e-6);
        let x = Query::new(vec![1.0, 0.0]);
        assert!((x.cosine_blob(&to_blob(&[2.0, 0.0])) - 1.0).abs() < 1e-6);
        assert!(x.cosine_blob(&to_blob(&[0.0, 1.0])).abs() < 1e-6);
        assert_eq!(
            Query::new(vec![1.0]).cosine_blob(&to_blob(&[1.0, 0.0])),
            0.0
        );
        assert_eq!(x.cosine_blob(&[1, 2, 3]), 0.0);
        let q = Query::new(vec![3.0, 4.0]);
        assert!((q.cosine_blob(&to_blob(&[6.0, 8.0])) - 1.0).abs() < 1e-6);
        let expected = 11.0 / (5.0 * 5.0f32.sqrt());
        assert!((q.cosine_blob(&to_blob(&[1.0, 2.0])) - expected).abs() < 1e-6);
    }
}
