package lock

import (
	"fmt"
	"strings"
)

// fenceKey returns the key of the fence counter of key: key+":fence" when
// key has a hash tag (a non-empty {...}), else "{"+key+"}:fence", whose
// hash tag is the whole key. Either way the counter hashes to key's Redis
// Cluster slot, so that obtain.lua may touch both. A key without a hash
// tag that contains '}' cannot be wrapped that way and is an error.
func fenceKey(key string) (string, error) {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key + ":fence", nil
		}
	}
	if strings.IndexByte(key, '}') >= 0 {
		return "", fmt.Errorf("lock: fenced key %q: a key with '}' needs a hash tag ({...}) to fence", key)
	}
	return "{" + key + "}:fence", nil
}
