/* A fresh temporary directory per test (Criterion .init / .fini) and paths
 * inside it, for tests that write files. */
#ifndef GF_TEST_SUPPORT_FILES_H
#define GF_TEST_SUPPORT_FILES_H

/* Creates $TMPDIR/<prefix>-XXXXXX (default /tmp), asserting it worked. */
void tf_tmpdir_make(const char *prefix);
/* Removes the directory and everything in it. */
void tf_tmpdir_remove(void);
/* The directory made by tf_tmpdir_make. */
const char *tf_tmpdir(void);
/* <tmpdir>/<name>; the result lives until 8 more calls. */
const char *tf_path(const char *name);

#endif
