package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// Envelope is what the database holds for one owner: its data key wrapped by the keyring
// key KeyID, and its values sealed by the data key. Neither is readable without the key.
type Envelope struct {
	KeyID      string
	WrappedKey []byte
	Sealed     []byte
}

// Owned is an envelope with its owner (JobOwner, TeamOwner), as rotation and the
// start-up check read them.
type Owned struct {
	Owner string
	Envelope
}

// ErrKeyMissing is returned when an envelope names a key the keyring does not hold.
var ErrKeyMissing = errors.New("the secrets key file holds no key of that id")

// ErrNotOpened is returned when a key of the right id does not open an envelope: another
// key under the same id, or an envelope of another owner or altered.
var ErrNotOpened = errors.New("the key does not open it")

// The purposes bound into the associated data, so that a wrapped data key never opens as
// a sealed value and the reverse.
const (
	purposeDataKey = "datajobs data key\x00"
	purposeValue   = "datajobs sealed value\x00"
)

// Seal encrypts plaintext for owner (the job's UID, a team's name: the associated data,
// so that an envelope copied to another owner's row does not open): a new data key seals
// the plaintext and the keyring's newest key wraps the data key.
func (k *Keyring) Seal(owner string, plaintext []byte) (Envelope, error) {
	dataKey := make([]byte, keyBytes)
	_, _ = rand.Read(dataKey)
	env, err := k.wrap(owner, dataKey)
	if err != nil {
		return Envelope{}, err
	}
	env.Sealed, err = seal(dataKey, []byte(purposeValue+owner), plaintext)
	return env, err
}

// Reseal encrypts plaintext for owner with the data key of cur (a replace keeps the data
// key; Rewrap changes the key that wraps it).
func (k *Keyring) Reseal(owner string, cur Envelope, plaintext []byte) (Envelope, error) {
	dataKey, err := k.unwrap(owner, cur)
	if err != nil {
		return Envelope{}, err
	}
	sealed, err := seal(dataKey, []byte(purposeValue+owner), plaintext)
	if err != nil {
		return Envelope{}, err
	}
	return Envelope{KeyID: cur.KeyID, WrappedKey: cur.WrappedKey, Sealed: sealed}, nil
}

// Open decrypts the values of owner's envelope.
func (k *Keyring) Open(owner string, env Envelope) ([]byte, error) {
	dataKey, err := k.unwrap(owner, env)
	if err != nil {
		return nil, err
	}
	out, err := open(dataKey, []byte(purposeValue+owner), env.Sealed)
	if err != nil {
		return nil, fmt.Errorf("values sealed under key %q: %w", env.KeyID, ErrNotOpened)
	}
	return out, nil
}

// Rewrap wraps the data key of env with the newest key; the sealed values stay as they
// are. It returns env unchanged when the newest key wraps it already.
func (k *Keyring) Rewrap(owner string, env Envelope) (Envelope, error) {
	if env.KeyID == k.Newest() {
		return env, nil
	}
	dataKey, err := k.unwrap(owner, env)
	if err != nil {
		return Envelope{}, err
	}
	out, err := k.wrap(owner, dataKey)
	if err != nil {
		return Envelope{}, err
	}
	out.Sealed = env.Sealed
	return out, nil
}

// Check opens env's data key without decrypting its values: that the keyring holds a key
// that opens it.
func (k *Keyring) Check(owner string, env Envelope) error {
	_, err := k.unwrap(owner, env)
	return err
}

func (k *Keyring) wrap(owner string, dataKey []byte) (Envelope, error) {
	id, kek := k.newestKey()
	wrapped, err := seal(kek, []byte(purposeDataKey+owner), dataKey)
	return Envelope{KeyID: id, WrappedKey: wrapped}, err
}

func (k *Keyring) unwrap(owner string, env Envelope) ([]byte, error) {
	kek, ok := k.key(env.KeyID)
	if !ok {
		return nil, fmt.Errorf("data key wrapped under key %q: %w", env.KeyID, ErrKeyMissing)
	}
	dataKey, err := open(kek, []byte(purposeDataKey+owner), env.WrappedKey)
	if err != nil {
		return nil, fmt.Errorf("data key wrapped under key %q: %w", env.KeyID, ErrNotOpened)
	}
	return dataKey, nil
}

// seal is AES-256-GCM with a random 12-byte nonce, written before the ciphertext.
func seal(key, aad, plaintext []byte) ([]byte, error) {
	aead, err := gcm(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, plaintext, aad), nil
}

func open(key, aad, sealed []byte) ([]byte, error) {
	aead, err := gcm(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, errors.New("too short")
	}
	n := aead.NonceSize()
	return aead.Open(nil, sealed[:n], sealed[n:], aad)
}

func gcm(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// JobOwner is the owner of a job's secrets: its UID, so that a same-name successor (a new
// UID) never opens them.
func JobOwner(uid string) string { return "job:" + uid }

// WebhookOwner is the owner of a team webhook's signing secret: its id, so that a secret
// copied to another webhook's row does not open.
func WebhookOwner(id string) string { return "webhook:" + id }

// TeamOwner is the owner of a team's OAuth credentials.
func TeamOwner(team string) string { return "team:" + team }

// TeamOAuth is a team's OAuth credentials as stored: the client id in the clear (VDK
// answers it to any member and maps client ids to teams), the client secret sealed.
type TeamOAuth struct {
	Team     string
	ClientID string
	Secret   Envelope
}
