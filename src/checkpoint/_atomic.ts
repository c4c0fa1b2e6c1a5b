/**
 * Replacing a file so that readers, and the disk after a crash, see either the old contents or
 * the new ones, never a mix, and never writing through a link: the checkpoint's name for
 * io/private_files.ts's atomic writes, which every writer of the job's files shares.
 * @module
 */

export { removeStaleTemporaries, writeFileAtomic } from "../io/private_files.ts";
