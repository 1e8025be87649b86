/* Check suite for base/data.c (gr_data_path): graphrun's data is found relative to the program or
 * library, whatever the working directory, and a missing file's error names every folder tried.
 * The suite runs from the source root (CTest's working directory) as build/test_data, so it finds
 * the build tree's data (build/data, a link to the source's data/). */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/data.h"
#include "graphrun/runtime.h"

/* The same file: device and inode equal. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

START_TEST(test_finds_the_source_data_from_the_build_tree)
{
    char path[PATH_MAX];
    ck_assert_int_eq(gr_data_path("dog.jpg", path, sizeof path), GR_OK);
    ck_assert_msg(same_file(path, "data/dog.jpg"), "gr_data_path gave %s, not data/dog.jpg", path);
    ck_assert_int_eq(gr_data_path("shapes-calib", path, sizeof path), GR_OK);
    ck_assert_msg(same_file(path, "data/shapes-calib"), "shapes-calib: %s", path);
}
END_TEST

/* The lookup does not depend on the working directory (the installed CLI runs from anywhere). */
START_TEST(test_independent_of_the_working_directory)
{
    char here[PATH_MAX], expected[PATH_MAX + 32], path[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(here, sizeof here));
    snprintf(expected, sizeof expected, "%s/data/shapes.weights", here);
    ck_assert_int_eq(chdir("/"), 0);
    gr_status st = gr_data_path("shapes.weights", path, sizeof path);
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes"; /* its bundled trained weights */
    gr_model *model = NULL;
    gr_status load = gr_model_load(&mo, &model);
    const char *error = load == GR_OK ? "" : gr_last_error();
    ck_assert_int_eq(chdir(here), 0);
    ck_assert_int_eq(st, GR_OK);
    ck_assert_msg(same_file(path, expected), "from /: %s", path);
    ck_assert_msg(load == GR_OK, "--model shapes from /: %s", error);
    gr_model_info info;
    ck_assert_int_eq(gr_model_get_info(model, &info), GR_OK);
    ck_assert_int_eq(info.synthetic_weights, 0);
    gr_model_destroy(model);
}
END_TEST

START_TEST(test_missing_file_names_the_folders_tried)
{
    char path[PATH_MAX] = "x";
    ck_assert_int_eq(gr_data_path("no-such-file.jpg", path, sizeof path), GR_ERR_IO);
    ck_assert_str_eq(path, "");
    const char *msg = gr_last_error();
    ck_assert_msg(strstr(msg, "'no-such-file.jpg' not found"), "%s", msg);
    /* The build tree's folder is among those named: build/data (the test binary's folder). */
    ck_assert_msg(strstr(msg, "/data"), "%s", msg);
    ck_assert_msg(strstr(msg, "share/graphrun"), "%s", msg);
    ck_assert_ptr_null(strchr(msg, '\n'));
}
END_TEST

START_TEST(test_bad_arguments)
{
    char path[8];
    ck_assert_int_eq(gr_data_path("dog.jpg", path, sizeof path), GR_ERR_LIMIT);
    ck_assert_msg(strstr(gr_last_error(), "does not fit in 8 bytes"), "%s", gr_last_error());
    ck_assert_int_eq(gr_data_path(NULL, path, sizeof path), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_data_path("", path, sizeof path), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_data_path("dog.jpg", NULL, 8), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_data_path("dog.jpg", path, 0), GR_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_bundled_photos)
{
    static const char *const names[] = {"dog.jpg", "person.jpg", "horses.jpg", "eagle.jpg",
                                        "giraffe.jpg"};
    const char *const *list = NULL;
    ck_assert_int_eq(gr_data_bundled_photos(&list), GR_OK);
    for (int i = 0; i < GR_BUNDLED_PHOTOS; i++) {
        char expected[64];
        snprintf(expected, sizeof expected, "data/%s", names[i]);
        ck_assert_ptr_nonnull(list[i]);
        ck_assert_msg(same_file(list[i], expected), "photo %d: %s", i, list[i]);
    }
    ck_assert_ptr_null(list[GR_BUNDLED_PHOTOS]);
}
END_TEST

static Suite *data_suite(void)
{
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("data");
    tcase_add_test(tc, test_finds_the_source_data_from_the_build_tree);
    tcase_add_test(tc, test_independent_of_the_working_directory);
    tcase_add_test(tc, test_missing_file_names_the_folders_tried);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_bundled_photos);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(data_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
