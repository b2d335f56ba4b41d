package main

import "errors"

var errNotYet = errors.New("not implemented in this build")

func runAgent(args []string) error  { return errNotYet }
func runMember(args []string) error { return errNotYet }
func runPVC(args []string) error    { return errNotYet }
