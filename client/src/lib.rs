//! The exchange client library (missing-chapters §2; 07 §5.7, §6.9, §9.5). Issue 5, in progress.
