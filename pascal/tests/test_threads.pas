{ 64 TThreads build strings and objects with string fields and free each
  other's objects (a shared table of slots, swapped atomically). At the end:
  no crash, no programming error counted, and after spry_trim spry's
  in_use is back where it started (no leak), every thread heap dormant. }
program test_threads;
{$mode objfpc}{$H+}
uses spry, cthreads, Classes, SysUtils;

{$I check.inc}

const
  Threads = 64;
  Slots = 4096;
  DefaultRounds = 3000;

type
  TItem = class
    Name, Text: string;
    Numbers: array of Integer;
    constructor Create(id, r: Integer);
  end;

  TWorker = class(TThread)
    Id, Rounds, Made: Integer;
    procedure Execute; override;
  end;

var
  Table: array[0..Slots - 1] of Pointer;

constructor TItem.Create(id, r: Integer);
var i: Integer;
begin
  Name := 'worker ' + IntToStr(id) + ' round ' + IntToStr(r);
  Text := '';
  for i := 0 to r mod 40 do
    Text := Text + Name[1 + i mod Length(Name)];
  SetLength(Numbers, 1 + r mod 300);
  Numbers[0] := r;
end;

procedure TWorker.Execute;
var
  r, slot: Integer;
  seed: Cardinal;
  item, old: TItem;
  sl: TStringList;
  s: string;
begin
  seed := Cardinal(Id) * 2654435761 + 1;
  sl := TStringList.Create;
  try
    for r := 1 to Rounds do
      begin
        item := TItem.Create(Id, r);
        seed := seed * 1103515245 + 12345;
        slot := (seed shr 8) mod Slots;
        { the object lands in a shared slot; whatever was there (most often
          another thread's) is freed here }
        old := TItem(InterlockedExchange(Table[slot], Pointer(item)));
        old.Free;
        if r mod 50 = 0 then
          begin
            sl.Add(Format('%d:%s', [r, item.Name]));
            if sl.Count > 20 then sl.Delete(0);
            s := sl.Text;
            SetLength(s, Length(s) div 2);
          end;
        Inc(Made);
      end;
  finally
    sl.Free;
  end;
end;

{ 64 threads, all started before any is joined; returns the rounds made }
function RunAll(rounds: Integer): Integer;
var
  workers: array[0..Threads - 1] of TWorker;
  i: Integer;
begin
  for i := 0 to Threads - 1 do
    begin
      workers[i] := TWorker.Create(True);
      workers[i].Id := i;
      workers[i].Rounds := rounds;
      workers[i].Start;
    end;
  Result := 0;
  for i := 0 to Threads - 1 do
    begin
      workers[i].WaitFor;
      Inc(Result, workers[i].Made);
      workers[i].Free;
    end;
  for i := 0 to Slots - 1 do
    begin
      TItem(Table[i]).Free;
      Table[i] := nil;
    end;
end;

type
  { ends on its own (FreeOnTerminate): nobody joins it }
  TLoner = class(TThread)
    procedure Execute; override;
  end;

var
  LonersLeft: LongInt = 0;

procedure TLoner.Execute;
var s: string; i: Integer;
begin
  s := '';
  for i := 1 to 2000 do s := s + IntToStr(i);
  InterlockedDecrement(LonersLeft);
end;

{ Threads that nobody joins: their heaps go dormant when they end (the RTL's
  DoneThread, then pthread_exit runs spry's key destructor), promptly. }
procedure CheckUnjoined;
const
  Loners = 8;
var
  st: TSpryStats;
  i: Integer;
  t0: QWord;
begin
  LonersLeft := Loners;
  for i := 1 to Loners do
    with TLoner.Create(True) do
      begin
        FreeOnTerminate := True;
        Start;
      end;
  t0 := GetTickCount64;
  repeat
    spry_stats_get(@st);
    if (LonersLeft = 0) and (st.heaps_abandoned + 1 >= st.heaps) then break;
    Sleep(1);
  until GetTickCount64 - t0 > 5000;
  Check(st.heaps_abandoned + 1 >= st.heaps, 'heaps of unjoined threads not released after 5 s: ' +
    IntToStr(st.heaps) + ' heaps, ' + IntToStr(st.heaps_abandoned) + ' dormant');
  WriteLn('unjoined threads: every heap dormant ', GetTickCount64 - t0, ' ms after their start');
end;

var
  start, after: TSpryStats;
  made: Integer;
begin
  Check(SpryInstalled, 'spry is not the memory manager');
  { a first, short run: what the RTL allocates once for good (the thread
    manager's and Classes' lazily made globals) is not a leak }
  RunAll(10);
  spry_trim;
  spry_stats_get(@start);
  made := RunAll(DefaultRounds);
  spry_trim;
  spry_stats_get(@after);
  { checks after the snapshot: their message strings are temporaries that
    live until the end of the block }
  Check(made = Threads * DefaultRounds, 'rounds lost: ' + IntToStr(made));
  WriteLn('in_use ', start.in_use, ' -> ', after.in_use, ', heaps ', after.heaps,
    ' (', after.heaps_abandoned, ' dormant), committed peak ', after.committed_peak div 1024, ' KiB');
  Check(after.errors = 0, 'programming errors counted: ' + IntToStr(after.errors));
  Check(after.in_use <= start.in_use, 'leak: in_use ' + IntToStr(start.in_use) +
    ' -> ' + IntToStr(after.in_use));
  { every heap but the main thread's is dormant once the threads are joined }
  Check(after.heaps_abandoned + 1 >= after.heaps, 'thread heaps not released: ' +
    IntToStr(after.heaps) + ' heaps, ' + IntToStr(after.heaps_abandoned) + ' dormant');
  CheckUnjoined;
  Done('test_threads');
end.
