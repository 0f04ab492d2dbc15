//! Validation that mirrors the Karpenter v1 CRDs' schema and CEL rules, each violation
//! reported with its field path. (Filled in by the validation work.)
