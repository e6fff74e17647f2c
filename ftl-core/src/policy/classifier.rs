//! The hot/cold classifier seam. The baseline default is the Reusable SSD paper's rule: a write
//! request smaller than 64 KiB is hot. The classifier is consulted once per write request and,
//! for per-page classifiers, once per page.

/// Temperature of a write.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Temperature {
    /// Likely to be overwritten soon.
    Hot,
    /// Likely to stay.
    Cold,
}

/// A host write request as the classifier sees it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WriteRequest {
    /// First logical page.
    pub lpn: u32,
    /// Pages in the request.
    pub pages: u32,
    /// Bytes per logical page.
    pub page_bytes: u32,
}

/// Says whether written data is hot or cold.
pub trait Classifier {
    /// Classifies a whole request (called once per write request).
    fn classify_request(&mut self, req: &WriteRequest) -> Temperature;
    /// Classifies one page of a request; by default the request's temperature.
    fn classify_page(&mut self, _lpn: u32, request: Temperature) -> Temperature {
        request
    }
}

/// Hot if the request is smaller than `threshold_bytes` (default 64 KiB).
#[derive(Copy, Clone, Debug)]
pub struct RequestSizeClassifier {
    /// Requests strictly smaller than this are hot.
    pub threshold_bytes: u64,
}

impl Default for RequestSizeClassifier {
    fn default() -> Self {
        RequestSizeClassifier { threshold_bytes: 64 * 1024 }
    }
}

impl Classifier for RequestSizeClassifier {
    fn classify_request(&mut self, req: &WriteRequest) -> Temperature {
        if (req.pages as u64) * (req.page_bytes as u64) < self.threshold_bytes {
            Temperature::Hot
        } else {
            Temperature::Cold
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_rule_boundary_is_64_kib() {
        let mut c = RequestSizeClassifier::default();
        let req = |pages| WriteRequest { lpn: 0, pages, page_bytes: 4096 };
        assert_eq!(c.classify_request(&req(15)), Temperature::Hot);
        assert_eq!(c.classify_request(&req(16)), Temperature::Cold);
        assert_eq!(c.classify_page(3, Temperature::Cold), Temperature::Cold);
    }
}
