// Package secrets is the envelope encryption of secret values: a random data key per
// owner (a job, a team's OAuth credentials) seals the values with AES-256-GCM, bound to
// the owner by associated data, and a key-encryption key of a keyring file wraps the data
// key. The database then holds only ciphertext; the keyring file is the one thing an
// operator keeps apart from it (docs/operations.md).
package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// keyBytes is the size of every key: AES-256.
const keyBytes = 32

// fileKey is one key of the keyring file.
type fileKey struct {
	ID  string `json:"id"`
	Key string `json:"key"` // base64 (standard) of 32 bytes
}

// keyringFile is the file's format: {"keys": [{"id": ..., "key": ...}, ...]}, oldest
// first; the last key is the newest, the one that wraps new data keys.
type keyringFile struct {
	Keys []fileKey `json:"keys"`
}

// Keyring holds the key-encryption keys of a keyring file. It reads the file again when
// the file changed (checked before wrapping, and when a data key names a key it does not
// hold), so that an operator adds a key and rotates without restarting any replica.
type Keyring struct {
	path string

	mu       sync.Mutex
	keys     map[string][]byte
	newest   string
	modTime  time.Time
	size     int64
	loadedAt time.Time
}

// LoadKeyring reads the keyring file at path. The file must hold at least one key, every
// key 32 bytes in base64 under a unique, non-empty id.
func LoadKeyring(path string) (*Keyring, error) {
	k := &Keyring{path: path}
	if err := k.reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// Path is the keyring file's path.
func (k *Keyring) Path() string { return k.path }

// Newest is the id of the key that wraps new data keys.
func (k *Keyring) Newest() string {
	k.refresh()
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.newest
}

// IDs are the ids of the keys held, in no order.
func (k *Keyring) IDs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, 0, len(k.keys))
	for id := range k.keys {
		out = append(out, id)
	}
	return out
}

// key returns the key of id, reading the file again once if it is not held.
func (k *Keyring) key(id string) ([]byte, bool) {
	k.mu.Lock()
	key, ok := k.keys[id]
	k.mu.Unlock()
	if ok {
		return key, true
	}
	k.refresh()
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok = k.keys[id]
	return key, ok
}

// newestKey returns the newest key and its id, the file read again if it changed.
func (k *Keyring) newestKey() (string, []byte) {
	k.refresh()
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.newest, k.keys[k.newest]
}

// refresh reads the file again when its size or modification time changed. A file that
// became unreadable or invalid keeps the keys held: an edit in progress must not stop the
// service, and a key is never forgotten before the file says so in a valid form.
func (k *Keyring) refresh() {
	st, err := os.Stat(k.path)
	if err != nil {
		return
	}
	k.mu.Lock()
	same := st.ModTime().Equal(k.modTime) && st.Size() == k.size && time.Since(k.loadedAt) < time.Minute
	k.mu.Unlock()
	if !same {
		_ = k.reload()
	}
}

func (k *Keyring) reload() error {
	st, err := os.Stat(k.path)
	if err != nil {
		return fmt.Errorf("secrets key file: %w", err)
	}
	b, err := os.ReadFile(k.path)
	if err != nil {
		return fmt.Errorf("secrets key file: %w", err)
	}
	keys, newest, err := parseKeyring(b)
	if err != nil {
		return fmt.Errorf("secrets key file %s: %w", k.path, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys, k.newest, k.modTime, k.size, k.loadedAt = keys, newest, st.ModTime(), st.Size(), time.Now()
	return nil
}

// parseKeyring checks and decodes a keyring file's content. Its errors never quote key
// material.
func parseKeyring(b []byte) (map[string][]byte, string, error) {
	var f keyringFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, "", errors.New(`it is not a JSON object {"keys": [{"id": ..., "key": ...}]}`)
	}
	if len(f.Keys) == 0 {
		return nil, "", errors.New("it holds no key")
	}
	keys := make(map[string][]byte, len(f.Keys))
	for i, fk := range f.Keys {
		if fk.ID == "" {
			return nil, "", fmt.Errorf("key %d has no id", i+1)
		}
		if _, dup := keys[fk.ID]; dup {
			return nil, "", fmt.Errorf("the id %q is used twice", fk.ID)
		}
		raw, err := base64.StdEncoding.DecodeString(fk.Key)
		if err != nil || len(raw) != keyBytes {
			return nil, "", fmt.Errorf("key %q is not %d bytes in base64", fk.ID, keyBytes)
		}
		keys[fk.ID] = raw
	}
	return keys, f.Keys[len(f.Keys)-1].ID, nil
}

// AddKey appends a new random key to the keyring file at path, creating the file (mode
// 0600) when it does not exist, and returns the new key's id. The new key becomes the
// newest: it wraps new data keys at once, and `datajobs secrets rotate` re-wraps the old.
// The file is replaced atomically (written beside it, then renamed).
func AddKey(path string) (string, error) {
	var f keyringFile
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("secrets key file: %w", err)
	default:
		if _, _, err := parseKeyring(b); err != nil {
			return "", fmt.Errorf("secrets key file %s: %w", path, err)
		}
		_ = json.Unmarshal(b, &f)
	}
	raw := make([]byte, keyBytes)
	_, _ = rand.Read(raw)
	id := time.Now().UTC().Format("20060102T150405Z") + "-" + rand.Text()[:6]
	f.Keys = append(f.Keys, fileKey{ID: id, Key: base64.StdEncoding.EncodeToString(raw)})
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return "", err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("write secrets key file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write secrets key file: %w", err)
	}
	return id, nil
}
