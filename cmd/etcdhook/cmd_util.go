package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// usageError marks bad command-line input (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var u usageError
	var r refusalError
	switch {
	case errors.As(err, &u):
		return 2
	case errors.As(err, &r):
		return 3
	}
	return 1
}

// runInstall copies this executable to DEST: distroless images have no cp, and the etcd image has no
// etcdhook, so the init container copies the agent into the emptyDir the etcd container runs it from.
func runInstall(args []string) error {
	if len(args) != 1 {
		return usageError{fmt.Errorf("usage: etcdhook install DEST")}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	dest := args[0]
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".etcdhook-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}

// inClusterKube is the API client of a pod: the agent's, the Jobs', the hook's init container's.
func inClusterKube() (kubernetes.Interface, error) {
	kcfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(kcfg)
}
