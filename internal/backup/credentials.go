package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2/google"
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

// OpenWith opens d with the credentials in dir (a mounted Secret), for a process that reaches two
// stores with different credentials (spec.backup.copy). S3 reads the variables LoadCredentials sets when
// a bucket is opened, and keeps them; GCS's default opener fetches its credentials once per process, so
// a service account key of its own is given to a client built for this bucket alone.
func (d Destination) OpenWith(ctx context.Context, dir string) (*blob.Bucket, error) {
	sa := filepath.Join(dir, KeyGCSServiceAccount)
	if _, err := os.Stat(sa); d.Scheme != "gs" || dir == "" || err != nil {
		if err := LoadCredentials(dir); err != nil {
			return nil, err
		}
		return d.Open(ctx)
	}
	data, err := os.ReadFile(sa)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	creds, err := google.CredentialsFromJSON(ctx, data, "https://www.googleapis.com/auth/devstorage.read_write")
	if err != nil {
		return nil, fmt.Errorf("credentials: %s: %w", KeyGCSServiceAccount, err)
	}
	client, err := gcp.NewHTTPClient(gcp.DefaultTransport(), gcp.CredentialsTokenSource(creds))
	if err != nil {
		return nil, err
	}
	b, err := gcsblob.OpenBucket(ctx, client, d.Bucket, nil)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", d, err)
	}
	if d.Prefix != "" {
		b = blob.PrefixedBucket(b, d.Prefix+"/")
	}
	return b, nil
}
