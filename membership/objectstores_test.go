package membership

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/etcdhook/etcdhook/internal/backup"
)

// The object stores of the backup tests are real servers on loopback: MinIO (S3) and fake-gcs-server
// (the GCS JSON API), built from source by scripts/gotool.sh the first time; and a directory.

var toolPaths sync.Map

// tool is the path of a test server binary, built once by the project's script.
func tool(t testing.TB, name string) string {
	if p, ok := toolPaths.Load(name); ok {
		return p.(string)
	}
	out, err := exec.Command("../scripts/gotool.sh", name).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("scripts/gotool.sh %s: %v\n%s", name, err, ee.Stderr)
	}
	require.NoError(t, err)
	p := strings.TrimSpace(string(out))
	toolPaths.Store(name, p)
	return p
}

// store is one destination the backup tests write to.
type store struct {
	name string
	// url is the destination (spec.backup.destination).
	url string
	// credentials is the directory of a mounted credentials Secret ("" when none is needed).
	credentials string
}

// runServer starts a test server and stops it when the test ends; ready polls until it answers.
func runServer(t testing.TB, bin string, env []string, ready string, args ...string) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), out.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return
			}
		}
		select {
		case <-exited:
			t.Fatalf("%s exited: %s", filepath.Base(bin), out.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "%s did not answer at %s: %v", filepath.Base(bin), ready, err)
		time.Sleep(200 * time.Millisecond)
	}
}

const (
	minioUser   = "etcdhook-test"
	minioSecret = "etcdhook-test-secret"
)

// startMinIO runs MinIO on a throwaway directory with throwaway credentials and creates bucket.
func startMinIO(t testing.TB, bucket string) store {
	port, console := freePort(t), freePort(t)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	runServer(t, tool(t, "minio"), []string{"MINIO_ROOT_USER=" + minioUser, "MINIO_ROOT_PASSWORD=" + minioSecret, "MINIO_BROWSER=off"},
		endpoint+"/minio/health/live",
		"server", t.TempDir(), "--address", fmt.Sprintf("127.0.0.1:%d", port), "--console-address", fmt.Sprintf("127.0.0.1:%d", console), "--quiet")
	c := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(minioUser, minioSecret, ""),
	})
	_, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	require.NoError(t, err)
	// The credentials Secret as the pod mounts it: one file per key.
	creds := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(creds, backup.KeyAWSAccessKeyID), []byte(minioUser), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(creds, backup.KeyAWSSecretAccessKey), []byte(minioSecret), 0o600))
	return store{name: "s3", credentials: creds,
		url: fmt.Sprintf("s3://%s/etcd?endpoint=%s&region=us-east-1&use_path_style=true", bucket, endpoint)}
}

// startFakeGCS runs the GCS emulator in memory and creates bucket.
func startFakeGCS(t *testing.T, bucket string) store {
	port := freePort(t)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	runServer(t, tool(t, "fake-gcs-server"), nil, endpoint+"/storage/v1/b",
		"-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(port), "-backend", "memory",
		"-public-host", fmt.Sprintf("127.0.0.1:%d", port), "-log-level", "warn")
	resp, err := http.Post(endpoint+"/storage/v1/b?project=etcdhook", "application/json", strings.NewReader(`{"name":"`+bucket+`"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Less(t, resp.StatusCode, 300, "creating bucket %s", bucket)
	return store{name: "gcs", url: fmt.Sprintf("gs://%s/etcd?endpoint=%s", bucket, endpoint)}
}

// fileStore is a directory (a volume in a pod).
func fileStore(t *testing.T) store {
	return store{name: "file", url: "file://" + filepath.Join(t.TempDir(), "backups")}
}

// destination parses a store's URL with its credentials loaded as the pod loads them.
func (s store) destination(t *testing.T) backup.Destination {
	d, err := backup.ParseDestination(s.url)
	require.NoError(t, err)
	loadCredentials(t, s.credentials)
	return d
}

// openBucket opens d (as destination loaded its credentials) until the test ends.
func openBucket(t *testing.T, d backup.Destination) *blob.Bucket {
	t.Helper()
	b, err := d.Open(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// loadCredentials loads a credentials directory into the environment for this test only.
func loadCredentials(t *testing.T, dir string) {
	for _, k := range []string{backup.KeyAWSAccessKeyID, backup.KeyAWSSecretAccessKey, backup.KeyAWSSessionToken, "GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST"} {
		t.Setenv(k, os.Getenv(k)) // restored when the test ends
	}
	require.NoError(t, backup.LoadCredentials(dir))
}
