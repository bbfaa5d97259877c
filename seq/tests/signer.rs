//! The sliced signer is RFC 8032 Ed25519, byte for byte (07 §6.2).

use ed25519_dalek::{Signer, SigningKey, Verifier};
use vyrn_seq::signer::SlicedSigner;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn rfc8032_test_vectors() {
    // RFC 8032 §7.1, TEST 1, 2, 3.
    let cases = [
        (
            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
            "",
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
        ),
        (
            "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
            "72",
            "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
        ),
        (
            "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
            "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
            "af82",
            "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
        ),
    ];
    for (sk, pk, msg, sig) in cases {
        let seed: [u8; 32] = hex(sk).try_into().unwrap();
        let mut s = SlicedSigner::new(&seed);
        assert_eq!(s.public().to_vec(), hex(pk), "public key");
        let got = s.sign(&hex(msg)).unwrap();
        assert_eq!(got.to_vec(), hex(sig), "signature of {msg:?}");
    }
}

#[test]
fn matches_ed25519_dalek_and_verifies_strictly() {
    let mut rng = vyrn_wire::corpus::Rng::new(5);
    for n in 0..200usize {
        let mut seed = [0u8; 32];
        for b in seed.iter_mut() {
            *b = rng.next_u64() as u8;
        }
        let len = n % 257;
        let msg: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let dalek = SigningKey::from_bytes(&seed);
        let want = dalek.sign(&msg).to_bytes();
        let mut s = SlicedSigner::new(&seed);
        // Interleave: start, then step one slice at a time.
        assert!(s.start(&msg));
        assert!(!s.start(&msg), "busy while signing");
        let mut slices = 0;
        let got = loop {
            slices += 1;
            if let Some(sig) = s.step() {
                break sig;
            }
        };
        assert_eq!(got, want, "message of {len} bytes");
        assert!(slices >= 64 + 3, "{slices} slices");
        let sig = ed25519_dalek::Signature::from_bytes(&got);
        assert!(dalek.verifying_key().verify(&msg, &sig).is_ok());
        assert!(dalek.verifying_key().verify_strict(&msg, &sig).is_ok());
    }
}

#[test]
fn signs_block_headers_the_decoder_accepts() {
    use vyrn_wire::header::BlockHeader;
    let seed = [9u8; 32];
    let mut s = SlicedSigner::new(&seed);
    let mut h = BlockHeader {
        height: 5,
        epoch: 1,
        book: 1,
        first_step: 10,
        last_step: 20,
        prev: [1; 32],
        order_root: [2; 32],
        data_root: [3; 32],
        seq_sig: [0; 64],
    };
    h.seq_sig = s.sign(&h.sig_message()).unwrap();
    assert!(h.verify(&SigningKey::from_bytes(&seed).verifying_key()));
    let mut d = h;
    d.sign(&SigningKey::from_bytes(&seed));
    assert_eq!(d.seq_sig, h.seq_sig);
}
