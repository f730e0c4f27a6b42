// checklog verifies hyperbook audit proofs with Go's sumdb packages, an implementation of
// signed notes and RFC 6962 trees independent of ours. It reads one JSON request on stdin:
//
//	{"verifier_key": "...", "checks": [
//	  {"kind": "checkpoint", "note": "..."},
//	  {"kind": "inclusion", "note": "...", "entry": "<hex event hash>", "leaf_index": 0, "hashes": ["b64"...]},
//	  {"kind": "consistency", "old_note": "...", "note": "...", "hashes": ["b64"...]}]}
//
// and prints one line per check, "ok" or "FAILED: why"; the exit status is 1 if any failed.
package main

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type check struct {
	Kind      string   `json:"kind"`
	Note      string   `json:"note"`
	OldNote   string   `json:"old_note"`
	Entry     string   `json:"entry"`
	LeafIndex int64    `json:"leaf_index"`
	Hashes    []string `json:"hashes"`
}

type request struct {
	VerifierKey string  `json:"verifier_key"`
	Checks      []check `json:"checks"`
}

type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

// opened verifies the note's signature and reads its tlog-checkpoint body.
func opened(text string, verifiers note.Verifiers) (checkpoint, error) {
	n, err := note.Open([]byte(text), verifiers)
	if err != nil {
		return checkpoint{}, err
	}
	lines := strings.SplitN(n.Text, "\n", 4)
	if len(lines) < 4 {
		return checkpoint{}, errors.New("not a checkpoint: origin, size and root hash")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 {
		return checkpoint{}, errors.New("not a checkpoint: bad size")
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		return checkpoint{}, fmt.Errorf("not a checkpoint: %v", err)
	}
	return checkpoint{lines[0], size, root}, nil
}

func hashes(encoded []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(encoded))
	for i, e := range encoded {
		raw, err := base64.StdEncoding.DecodeString(e)
		if err != nil || len(raw) != tlog.HashSize {
			return nil, fmt.Errorf("proof hash %d is not 32 bytes of base64", i)
		}
		copy(out[i][:], raw)
	}
	return out, nil
}

func run(c check, verifiers note.Verifiers) error {
	signed, err := opened(c.Note, verifiers)
	if err != nil {
		return err
	}
	switch c.Kind {
	case "checkpoint":
		return nil
	case "inclusion":
		entry, err := hex.DecodeString(c.Entry)
		if err != nil {
			return err
		}
		proof, err := hashes(c.Hashes)
		if err != nil {
			return err
		}
		return tlog.CheckRecord(proof, signed.size, signed.root, c.LeafIndex, tlog.RecordHash(entry))
	case "consistency":
		old, err := opened(c.OldNote, verifiers)
		if err != nil {
			return err
		}
		if old.origin != signed.origin {
			return errors.New("the checkpoints are of different logs")
		}
		proof, err := hashes(c.Hashes)
		if err != nil {
			return err
		}
		return tlog.CheckTree(proof, signed.size, signed.root, old.size, old.root)
	}
	return fmt.Errorf("unknown check %q", c.Kind)
}

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Println("FAILED: request:", err)
		os.Exit(2)
	}
	verifier, err := note.NewVerifier(req.VerifierKey)
	if err != nil {
		fmt.Println("FAILED: verifier key:", err)
		os.Exit(2)
	}
	verifiers := note.VerifierList(verifier)
	status := 0
	for _, c := range req.Checks {
		if err := run(c, verifiers); err != nil {
			fmt.Println("FAILED:", err)
			status = 1
		} else {
			fmt.Println("ok")
		}
	}
	os.Exit(status)
}
