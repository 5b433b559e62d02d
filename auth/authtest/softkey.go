package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"testing"
)

// SoftKey is a passkey kept in the test: a P-256 key and its counter,
// answering WebAuthn ceremonies as an authenticator with "none"
// attestation would, for the relying party of the test servers
// (https://login.example.test/) unless RPID and Origin say otherwise. It
// lets tests make assertions a browser would refuse to: a counter gone
// back, a signature of another key.
type SoftKey struct {
	ID     []byte
	priv   *ecdsa.PrivateKey
	Count  uint32
	Handle []byte
	// RPID is the relying party the key answers for, Origin the page's.
	RPID, Origin string
	// PresenceOnly makes an authenticator that only tests that someone
	// touched it, as a security key without a PIN does: its answers say
	// the user was present, never verified.
	PresenceOnly bool
	// Absent makes answers whose user-present flag is unset, as if no
	// one touched the authenticator: what no browser passes on, and a
	// relying party must refuse.
	Absent bool
	// Transports are what Create says the credential is reached by; nil
	// says "internal".
	Transports []string
}

// SoftRPID and SoftOrigin are the relying party of the test servers, as
// a SoftKey answers for by default.
const (
	SoftRPID   = "login.example.test"
	SoftOrigin = "https://login.example.test"
)

var b64 = base64.RawURLEncoding

// NewSoftKey draws a key and a credential id.
func NewSoftKey(t testing.TB) *SoftKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 16)
	rand.Read(id)
	return &SoftKey{ID: id, priv: priv, RPID: SoftRPID, Origin: SoftOrigin}
}

// PublicKeyOptions reads the challenge and user handle of options JSON.
func PublicKeyOptions(t testing.TB, body string) (challenge string, userID []byte) {
	t.Helper()
	var o struct {
		PublicKey struct {
			Challenge string `json:"challenge"`
			User      struct {
				ID string `json:"id"`
			} `json:"user"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(body), &o); err != nil || o.PublicKey.Challenge == "" {
		t.Fatalf("options %s: %v", body, err)
	}
	if o.PublicKey.User.ID != "" {
		var err error
		if userID, err = b64.DecodeString(o.PublicKey.User.ID); err != nil {
			t.Fatal(err)
		}
	}
	return o.PublicKey.Challenge, userID
}

func (k *SoftKey) clientData(kind, challenge string) []byte {
	b, _ := json.Marshal(map[string]any{"type": kind, "challenge": challenge, "origin": k.Origin, "crossOrigin": false})
	return b
}

// cborBytes is the CBOR head of a byte string of n bytes (n < 65536).
func cborBytes(n int) []byte {
	switch {
	case n < 24:
		return []byte{0x40 | byte(n)}
	case n < 256:
		return []byte{0x58, byte(n)}
	}
	return []byte{0x59, byte(n >> 8), byte(n)}
}

// coseKey is the key as a COSE EC2 map: kty 2, alg -7 (ES256), crv 1.
func (k *SoftKey) coseKey() []byte {
	x, y := make([]byte, 32), make([]byte, 32)
	k.priv.X.FillBytes(x)
	k.priv.Y.FillBytes(y)
	out := []byte{0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21}
	out = append(append(out, cborBytes(32)...), x...)
	out = append(out, 0x22)
	return append(append(out, cborBytes(32)...), y...)
}

// authData is the authenticator data: user present (unless Absent) and,
// unless PresenceOnly, verified, with the attested credential when
// attested.
func (k *SoftKey) authData(attested bool) []byte {
	h := sha256.Sum256([]byte(k.RPID))
	flags := byte(0x01) // UP
	if k.Absent {
		flags = 0
	}
	if !k.PresenceOnly {
		flags |= 0x04 // UV
	}
	if attested {
		flags |= 0x40
	}
	out := append(h[:], flags)
	out = binary.BigEndian.AppendUint32(out, k.Count)
	if attested {
		out = append(out, make([]byte, 16)...) // AAGUID
		out = binary.BigEndian.AppendUint16(out, uint16(len(k.ID)))
		out = append(append(out, k.ID...), k.coseKey()...)
	}
	return out
}

// Create answers registration options: the credential's JSON.
func (k *SoftKey) Create(t testing.TB, options string) string {
	t.Helper()
	challenge, handle := PublicKeyOptions(t, options)
	k.Handle = handle
	ad := k.authData(true)
	att := []byte{0xa3, 0x63, 'f', 'm', 't', 0x64, 'n', 'o', 'n', 'e', 0x67, 'a', 't', 't', 'S', 't', 'm', 't', 0xa0,
		0x68, 'a', 'u', 't', 'h', 'D', 'a', 't', 'a'}
	att = append(append(att, cborBytes(len(ad))...), ad...)
	transports := k.Transports
	if transports == nil {
		transports = []string{"internal"}
	}
	b, _ := json.Marshal(map[string]any{
		"id": b64.EncodeToString(k.ID), "rawId": b64.EncodeToString(k.ID), "type": "public-key",
		"response": map[string]any{
			"clientDataJSON":    b64.EncodeToString(k.clientData("webauthn.create", challenge)),
			"attestationObject": b64.EncodeToString(att), "transports": transports,
		},
	})
	return string(b)
}

// Get answers assertion options with the counter moved on by step (0
// leaves it, a negative step takes it back), signed by signer (k if nil).
func (k *SoftKey) Get(t testing.TB, options string, step int, signer *SoftKey) string {
	t.Helper()
	challenge, _ := PublicKeyOptions(t, options)
	k.Count = uint32(int(k.Count) + step)
	ad := k.authData(false)
	cd := k.clientData("webauthn.get", challenge)
	cdHash := sha256.Sum256(cd)
	digest := sha256.Sum256(append(append([]byte{}, ad...), cdHash[:]...))
	if signer == nil {
		signer = k
	}
	sig, err := ecdsa.SignASN1(rand.Reader, signer.priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{
		"id": b64.EncodeToString(k.ID), "rawId": b64.EncodeToString(k.ID), "type": "public-key",
		"response": map[string]any{
			"clientDataJSON": b64.EncodeToString(cd), "authenticatorData": b64.EncodeToString(ad),
			"signature": b64.EncodeToString(sig), "userHandle": b64.EncodeToString(k.Handle),
		},
	})
	return string(b)
}
