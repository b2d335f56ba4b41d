package backup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"filippo.io/age"
)

// Encryption at rest (issue 27; docs/design/16-backup-restore.md §16.11): snapshots and chunks are
// encrypted with age (filippo.io/age) in the pod that writes them; the store never sees a key or a
// plaintext byte. The key comes from a Secret mounted into the backup pods: the hook only names it, so
// a key is never in status, logs or the hook's answers.

// Encryption names how a stored object is encrypted (Manifest.Encryption): "" in the clear.
const EncryptionAge = "age"

// Keys are what a pod encrypts to and decrypts with. The first identity of the identity file encrypts
// (its recipient), with any extra recipients (an offline recovery key); every identity decrypts, so a
// key is rotated by putting the new one first and keeping the old below it while its backups live.
type Keys struct {
	Recipients []age.Recipient
	Identities []age.Identity
}

// Encrypts: new objects are encrypted.
func (k Keys) Encrypts() bool { return len(k.Recipients) > 0 }

// ErrNoKey: an object is encrypted and no identity given can open it. Another attempt does not change
// that: a restore refuses it.
var ErrNoKey = errors.New("encrypted backup: no key given opens it")

// Key names in an encryption Secret (spec.backup.encryption.secretName), as mounted.
const (
	KeyIdentity   = "identity"
	KeyRecipients = "recipients"
)

// LoadKeysDir reads the keys of a mounted encryption Secret: KeyIdentity, and KeyRecipients if
// present. Empty dir: no encryption.
func LoadKeysDir(dir string) (Keys, error) {
	if dir == "" {
		return Keys{}, nil
	}
	recipients := filepath.Join(dir, KeyRecipients)
	if _, err := os.Stat(recipients); errors.Is(err, fs.ErrNotExist) {
		recipients = ""
	}
	return LoadKeys(filepath.Join(dir, KeyIdentity), recipients)
}

// LoadKeys reads an identity file (age's format: one AGE-SECRET-KEY-1... per line, # comments) and,
// if named, a file of extra recipients (age1... per line). Empty identityFile: no encryption (a
// recipients file alone is refused: backups nobody here could read back or verify).
func LoadKeys(identityFile, recipientsFile string) (Keys, error) {
	if identityFile == "" {
		if recipientsFile != "" {
			return Keys{}, errors.New("a recipients file without an identity file: the writer could not read back what it encrypts")
		}
		return Keys{}, nil
	}
	b, err := os.ReadFile(identityFile)
	if err != nil {
		return Keys{}, fmt.Errorf("reading the encryption identity: %w", err)
	}
	ids, err := age.ParseIdentities(bytes.NewReader(b))
	if err != nil {
		// age's error does not quote the key; the file's name is enough to find it.
		return Keys{}, fmt.Errorf("the encryption identity file %s: %w", identityFile, err)
	}
	first, ok := ids[0].(*age.X25519Identity)
	if !ok {
		return Keys{}, fmt.Errorf("the encryption identity file %s: its first identity is not an X25519 one (AGE-SECRET-KEY-1...)", identityFile)
	}
	k := Keys{Identities: ids, Recipients: []age.Recipient{first.Recipient()}}
	if recipientsFile != "" {
		b, err := os.ReadFile(recipientsFile)
		if err != nil {
			return Keys{}, fmt.Errorf("reading the encryption recipients: %w", err)
		}
		if len(bytes.TrimSpace(b)) > 0 {
			rs, err := age.ParseRecipients(bytes.NewReader(b))
			if err != nil {
				return Keys{}, fmt.Errorf("the encryption recipients file %s: %w", recipientsFile, err)
			}
			k.Recipients = append(k.Recipients, rs...)
		}
	}
	return k, nil
}
