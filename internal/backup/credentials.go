package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Keys of a credentials Secret, mounted as files (docs/design/16-backup-restore.md §16.3). S3 takes the AWS SDK's
// variables, GCS a service account key file.
const (
	KeyAWSAccessKeyID     = "AWS_ACCESS_KEY_ID"
	KeyAWSSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	KeyAWSSessionToken    = "AWS_SESSION_TOKEN"
	KeyGCSServiceAccount  = "service-account.json"
)

// LoadCredentials points the stores' SDKs at the credentials in dir (a mounted Secret): the AWS keys
// become the process's AWS_* variables, a GCS key file GOOGLE_APPLICATION_CREDENTIALS. A file is read
// rather than passed as an environment variable by the pod spec so that the hook, which never reads
// the Secret, need not know its keys. An empty dir leaves the environment as it is.
func LoadCredentials(dir string) error {
	if dir == "" {
		return nil
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	for _, k := range []string{KeyAWSAccessKeyID, KeyAWSSecretAccessKey, KeyAWSSessionToken} {
		b, err := os.ReadFile(filepath.Join(dir, k))
		if errors.Is(err, fs.ErrNotExist) {
			// A key removed from the Secret must not linger from an earlier read (a session token
			// beside new static keys).
			if err := os.Unsetenv(k); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
		// A trailing newline (kubectl create secret --from-file) is not part of a key.
		if err := os.Setenv(k, strings.TrimSpace(string(b))); err != nil {
			return err
		}
	}
	sa := filepath.Join(dir, KeyGCSServiceAccount)
	if _, err := os.Stat(sa); err == nil {
		return os.Setenv("GOOGLE_APPLICATION_CREDENTIALS", sa)
	}
	return nil
}

// CredentialVar says whether an environment variable is one LoadCredentials or Open may set: a
// process started by one that loaded credentials (etcd, by the agent) is given its environment
// without them.
func CredentialVar(k string) bool {
	switch k {
	case KeyAWSAccessKeyID, KeyAWSSecretAccessKey, KeyAWSSessionToken, "GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST":
		return true
	}
	return false
}
