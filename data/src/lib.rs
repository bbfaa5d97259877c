//! The data tier box (07 §5): copy 2 of every client packet, deduped, hashed, kept and fanned
//! out. Issue 5, in progress.
