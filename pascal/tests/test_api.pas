{ The TMemoryManager's semantics under spry (see pascal/spry.pas): MemSize,
  GetMem(0), FreeMem(nil), FreeMemSize, ReAllocMem, AllocMem, heap status. }
program test_api;
{$mode objfpc}{$H+}
uses spry, cthreads, SysUtils;

{$I check.inc}

procedure Fill(p: PByte; n: PtrUInt; seed: Byte);
var i: PtrUInt;
begin
  for i := 0 to n - 1 do p[i] := Byte(seed + i * 7);
end;

function Same(p: PByte; n: PtrUInt; seed: Byte): Boolean;
var i: PtrUInt;
begin
  for i := 0 to n - 1 do
    if p[i] <> Byte(seed + i * 7) then exit(False);
  Result := True;
end;

const
  Sizes: array[0..17] of PtrUInt = (1, 7, 8, 15, 16, 24, 33, 64, 100, 1000,
    1024, 4000, 65536, 100000, 131072, 1000000, 2097152, 5000000);

procedure TestMemSize;
var
  i: Integer;
  p: Pointer;
begin
  for i := Low(Sizes) to High(Sizes) do
    begin
      p := GetMem(Sizes[i]);
      Check(p <> nil, 'GetMem(' + IntToStr(Sizes[i]) + ') nil');
      Check(MemSize(p) >= Sizes[i], 'MemSize < requested for ' + IntToStr(Sizes[i]));
      Check(MemSize(p) = spry_usable_size(p), 'MemSize <> spry_usable_size');
      Check(spry_owns(p), 'block not spry''s');
      Check(PtrUInt(p) mod 16 = 0, 'not 16-byte aligned: ' + IntToStr(Sizes[i]));
      FillChar(p^, MemSize(p), $5A);      { the whole usable size is writable }
      FreeMem(p);
    end;
end;

procedure TestZeroAndNil;
var
  a, b, p: Pointer;
  stats0, stats1: TSpryStats;
begin
  a := GetMem(0);
  b := GetMem(0);
  Check((a <> nil) and (b <> nil) and (a <> b), 'GetMem(0) not unique');
  FreeMem(a);
  FreeMem(b);
  FreeMem(nil);                                   { no-op }
  Check(FreeMem(nil) = 0, 'FreeMem(nil) <> 0');
  { FreeMemSize(p, 0) frees nothing (SysFreeMemSize exits first) }
  p := GetMem(48);
  spry_stats_get(@stats0);
  FreeMem(p, 0);
  Check(MemSize(p) >= 48, 'FreeMem(p, 0) freed');
  PByte(p)^ := 1;                                 { still ours }
  FreeMem(p, 48);                                 { spry_free_sized }
  spry_stats_get(@stats1);
  Check(stats1.errors = stats0.errors, 'FreeMemSize reported an error');
  { Dispose/New and a class go through the same manager }
  p := AllocMem(0);
  Check(p <> nil, 'AllocMem(0) nil');
  FreeMem(p);
end;

procedure TestReAlloc;
var
  p, q: Pointer;
  i: Integer;
  n: PtrUInt;
begin
  { nil -> allocates }
  p := nil;
  q := ReAllocMem(p, 100);
  Check((p <> nil) and (q = p), 'ReAllocMem(nil, 100)');
  Fill(p, 100, 3);
  { growth through every size range, contents kept }
  n := 100;
  for i := 1 to 16 do
    begin
      ReAllocMem(p, n * 2);
      Check(Same(p, n, 3), 'contents lost growing to ' + IntToStr(n * 2));
      n := n * 2;
      Fill(p, n, 3);
    end;
  { shrink down again, contents kept up to the new size }
  while n > 1 do
    begin
      n := n div 3;
      if n = 0 then n := 1;
      ReAllocMem(p, n);
      Check(Same(p, n, 3), 'contents lost shrinking to ' + IntToStr(n));
      Check(MemSize(p) >= n, 'MemSize after shrink');
    end;
  { size 0 frees and nils the var parameter }
  q := ReAllocMem(p, 0);
  Check((p = nil) and (q = nil), 'ReAllocMem(p, 0) did not nil p');
  q := ReAllocMem(p, 0);                          { nil, 0: nothing }
  Check((p = nil) and (q = nil), 'ReAllocMem(nil, 0)');
end;

{ Growth by small steps (the RTL's AnsiString appends): a block that must
  move grows to at least twice its usable size, so a block grown 20 bytes at
  a time from 1,000 bytes to 300,000 moves about 9 times, not once per size
  class (about 70); contents survive every move. }
procedure TestReAllocSteps;
var
  p, last: Pointer;
  n, moves: PtrUInt;
begin
  n := 1000;
  p := GetMem(n);
  Fill(p, n, 5);
  moves := 0;
  while n < 300000 do
    begin
      last := p;
      Inc(n, 20);
      if MemSize(p) < n then
        ReAllocMem(p, n);
      Check(MemSize(p) >= n, 'MemSize below the size asked');
      if p <> last then
        begin
          Inc(moves);
          Check(Same(p, n - 20, 5), 'contents lost moving to ' + IntToStr(n));
        end;
      Fill(PByte(p) + n - 20, 20, Byte(5 + (n - 20) * 7));
    end;
  Check(Same(p, n, 5), 'contents at the end of the steps');
  Check(moves <= 16, 'grown by steps: ' + IntToStr(moves) + ' moves, expected <= 16');
  FreeMem(p);
end;

procedure TestAllocMem;
var
  i, j: Integer;
  p: PByte;
  ok: Boolean;
begin
  { dirty blocks first, so that AllocMem gets reused memory }
  for i := Low(Sizes) to High(Sizes) do
    begin
      p := GetMem(Sizes[i]);
      FillChar(p^, Sizes[i], $FF);
      FreeMem(p);
      p := AllocMem(Sizes[i]);
      ok := True;
      for j := 0 to Sizes[i] - 1 do
        if p[j] <> 0 then begin ok := False; break; end;
      Check(ok, 'AllocMem(' + IntToStr(Sizes[i]) + ') not zeroed');
      FreeMem(p);
    end;
end;

procedure CheckStatus(const where: string);
var
  f: TFPCHeapStatus;
  h: THeapStatus;
begin
  f := GetFPCHeapStatus;
  h := GetHeapStatus;
  Check(f.CurrHeapFree = f.CurrHeapSize - f.CurrHeapUsed, where + ': CurrHeapFree <> Size - Used');
  Check(f.CurrHeapUsed <= f.CurrHeapSize, where + ': used > size');
  Check(f.MaxHeapSize >= f.CurrHeapSize, where + ': MaxHeapSize < CurrHeapSize');
  Check(f.MaxHeapUsed >= f.CurrHeapUsed, where + ': MaxHeapUsed < CurrHeapUsed');
  Check(h.TotalAddrSpace = h.TotalCommitted + h.TotalUncommitted, where + ': addr space');
  Check(h.TotalCommitted = h.TotalAllocated + h.TotalFree, where + ': committed');
  Check(h.TotalFree = h.FreeSmall + h.FreeBig + h.Unused, where + ': free');
end;

procedure TestHeapStatus;
const
  N = 20000;
var
  a: array of Pointer;
  i: Integer;
  before, during, after: TFPCHeapStatus;
begin
  SetLength(a, N);
  spry_trim;
  CheckStatus('start');
  before := GetFPCHeapStatus;
  for i := 0 to N - 1 do a[i] := GetMem(1000);
  CheckStatus('allocated');
  during := GetFPCHeapStatus;
  Check(during.CurrHeapUsed >= before.CurrHeapUsed + N * 1000,
    'CurrHeapUsed did not grow by the 20 MB allocated');
  for i := 0 to N - 1 do FreeMem(a[i]);
  spry_trim;
  CheckStatus('freed');
  after := GetFPCHeapStatus;
  Check(after.CurrHeapUsed <= before.CurrHeapUsed + 256 * 1024,
    'CurrHeapUsed not back after free + trim: ' + IntToStr(before.CurrHeapUsed) +
    ' -> ' + IntToStr(after.CurrHeapUsed));
  Check(after.MaxHeapSize >= during.CurrHeapSize, 'MaxHeapSize forgot the peak');
end;

type
  TThing = class
    Name: string;
    Value: Integer;
  end;

procedure TestStringsAndObjects;
var
  s: string;
  u: UnicodeString;
  i: Integer;
  o: TThing;
  stats: TSpryStats;
begin
  s := '';
  for i := 1 to 10000 do s := s + Chr(65 + i mod 26);
  Check(Length(s) = 10000, 'string append');
  Check(MemSize(Pointer(s) - 24) >= 10001, 'MemSize of the string block');
  SetLength(s, 1);
  Check(s = 'B', 'SetLength shrink');
  u := UnicodeString(StringOfChar('x', 5000));
  Check(Length(u) = 5000, 'UnicodeString');
  for i := 1 to 1000 do
    begin
      o := TThing.Create;
      o.Name := 'thing ' + IntToStr(i);
      o.Value := i;
      o.Free;
    end;
  try
    raise Exception.Create('allocated exception');
  except
    on E: Exception do Check(E.Message = 'allocated exception', 'exception');
  end;
  spry_stats_get(@stats);
  Check(stats.errors = 0, 'spry counted programming errors: ' + IntToStr(stats.errors));
  Check(stats.foreign_frees = 0, 'foreign frees: ' + IntToStr(stats.foreign_frees));
end;

begin
  Check(SpryInstalled, 'spry is not the memory manager');
  Check(not SpryCareful, 'spry first in uses needed the careful variant');
  TestMemSize;
  TestZeroAndNil;
  TestReAlloc;
  TestReAllocSteps;
  TestAllocMem;
  TestHeapStatus;
  TestStringsAndObjects;
  Done('test_api');
end.
